"""The own-job tutorial's examples, as the page gives them (``docs/tutorials/your-own-job.md``): read by its
page tests (tests/unit/test_guide_page.py) and run by tests/real/test_guide_real.py."""

import re

from tests.harness import REPO

#: The tutorial whose examples these are.
PAGE = REPO / "docs" / "tutorials" / "your-own-job.md"
_MARK = re.compile(r"<!-- example ([\w-]+): (file (\S+)|run) -->\n```\w*\n(.*?)```", re.S)
_FOR_EACH = re.compile(r"<!-- commands: examples -->\n```bash\n(.*?)```", re.S)


def examples() -> dict[str, dict[str, object]]:
    """Example name -> ``{"files": {path: text}, "run": [lines]}`` from the tutorial."""
    out: dict[str, dict[str, object]] = {}
    for m in _MARK.finditer(PAGE.read_text()):
        name, what, path, body = m.groups()
        entry = out.setdefault(name, {"files": {}, "run": None})
        if what == "run":
            entry["run"] = body.rstrip("\n").splitlines()
        else:
            entry["files"][path] = body  # type: ignore[index]
    return out


EXAMPLES = examples()
#: The commands the page runs in each example's folder, as written.
FOR_EACH = [line for block in _FOR_EACH.findall(PAGE.read_text()) for line in block.strip().splitlines()]
#: The page's shell setup: the clone's virtualenv and the clone on PYTHONPATH (this Python and ``PYTHONPATH`` at this
#: clone stand for them).
SETUP = ["source ~/eks-training/.venv/bin/activate", "export PYTHONPATH=~/eks-training"]
