"""The components reference lists every helper the components guide imports: a name the guide's code takes from
``eks_training`` that is not an exported component or type is in ``stacks.docs.library.HELPERS``, with its import."""

import re
from pathlib import Path

import components
from stacks.docs.library import HELPERS

ROOT = Path(__file__).resolve().parents[2]
IMPORT = re.compile(r"^from eks_training\.(?P<module>[\w.]+) import (?P<names>[\w, ]+)$", re.M)


def guide_imports(page: str) -> set[tuple[str, str]]:
    """(module, name) of each ``from eks_training.<module> import <name>`` of ``page``."""
    return {
        (m.group("module"), n.strip()) for m in IMPORT.finditer(page) for n in m.group("names").split(",") if n.strip()
    }


def test_every_helper_the_guide_imports_is_in_the_reference() -> None:
    exported = set(components.__all__)
    helpers = {(module, name) for module, name, _ in HELPERS}
    page = (ROOT / "docs/how-to/components.md").read_text()
    missing = {(m, n) for m, n in guide_imports(page) if not (m == "components" and n in exported)} - helpers
    assert missing == set(), f"add them to HELPERS in stacks/docs/library.py: {sorted(missing)}"
    reference = (ROOT / "docs/reference/components.md").read_text()
    for module, name in helpers:
        assert f"`from eks_training.{module} import {name}`" in reference, name


def test_the_import_reading_can_fail() -> None:
    page = "```python\nfrom eks_training.components.nodeplan import node_profile, other\n```\n"
    assert guide_imports(page) == {("components.nodeplan", "node_profile"), ("components.nodeplan", "other")}
