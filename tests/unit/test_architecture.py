"""ARCHITECTURE.md and the contributing guide's layout (``docs/contributing/layout.md``) stay true to the tree: every
module, function or attribute ARCHITECTURE.md names (``stacks.plan.build_plan``,
``components.nodeplan.node_profile``...) exists, every path it names exists, and the layout names every module and
package of ``components/`` and ``stacks/``."""

import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from tests.harness import REPO

#: A dotted name in backquotes starting at one of the project's packages (up to a call's or a subscript's bracket).
DOTTED = re.compile(r"`((?:stacks|components|training)(?:\.\w+)+)")
#: A path in backquotes (a folder ends with /), starting at an entry of the repository.
PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]*)`")


def _resolve(dotted: str) -> Optional[Any]:
    """The object ``dotted`` names (a module, then attributes), or ``None``."""
    parts = dotted.split(".")
    module: Optional[ModuleType] = None
    for i in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        obj: Any = module
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                annotations = getattr(obj, "__annotations__", {})
                fields = getattr(obj, "model_fields", {}) or getattr(obj, "__dataclass_fields__", {})
                if attr in annotations or attr in fields:
                    return attr  # a field of a model or dataclass
                return None
            obj = getattr(obj, attr)
        return obj
    return None


def unresolved(text: str, root: Path) -> list[str]:
    """The dotted names and paths ``text`` names that do not exist under ``root``."""
    bad = [d for d in DOTTED.findall(text) if _resolve(d) is None]
    tops = {
        p.name for p in root.iterdir()
    }  # a path of the repository starts at one of its entries (not a resource name)
    bad += [p for p in PATH.findall(text) if "<" not in p and p.split("/")[0] in tops and not (root / p).exists()]
    return bad


def test_every_name_and_path_architecture_names_exists() -> None:
    text = (REPO / "ARCHITECTURE.md").read_text()
    assert len(DOTTED.findall(text)) > 30 and len(PATH.findall(text)) > 10  # the walk reads the page
    assert unresolved(text, REPO) == []


def test_the_name_check_can_fail() -> None:
    assert unresolved(
        "`stacks.plan.build_plan` `stacks.plan.no_such_function` `stacks/kinds/` `stacks/nowhere/`", REPO
    ) == ["stacks.plan.no_such_function", "stacks/nowhere/"]


def _layout() -> str:
    text = (REPO / "docs" / "contributing" / "layout.md").read_text()
    return text[text.index("```text") + 7 :][: text[text.index("```text") + 7 :].index("```")]


def test_the_layout_names_every_module_and_package() -> None:
    layout = _layout()
    words = set(re.findall(r"[\w.-]+/?", layout))
    missing = [
        f"{top}/{p.name}"
        for top in ("components", "stacks")
        for p in sorted((REPO / top).iterdir())
        if not p.name.startswith(("_", "."))
        and (p.suffix == ".py" or (p / "__init__.py").exists())
        and p.name not in words
        and f"{p.name}/" not in words
    ]
    assert missing == []
    assert "ARCHITECTURE.md" in layout


def test_the_architecture_names_every_tool_and_its_recipes_are_one_copy() -> None:
    """ARCHITECTURE.md lists the command line's every tool (seven, with rehearse); the site renders that file, the one
    copy of the recipes, and the contributing guide links it."""
    from stacks.cli import TOOLS

    text = (REPO / "ARCHITECTURE.md").read_text()
    assert f"`python -m stacks {'|'.join(TOOLS)}`" in " ".join(text.split()), list(TOOLS)
    site = (REPO / "docs" / "explanation" / "architecture.md").read_text()
    assert "```{include} ../../ARCHITECTURE.md" in site and "## Recipes" not in site
    assert "explanation/architecture.md" in (REPO / "docs" / "contributing" / "index.md").read_text()
