"""The shell blocks the guides mark to be run, as the pages give them: the offline commands of the tutorials and
how-to guides, and the box's commands of the rehearse guide. tests/unit/test_command_pages.py reads them;
tests/real/test_docs_commands_real.py and tests/cluster/test_box_docs_commands.py run them."""

import re

from tests.harness import REPO

DOCS = REPO / "docs"
_OFFLINE = re.compile(r"<!-- commands: offline -->\n```bash\n(.*?)```", re.S)
#: The guide whose box commands these are.
BOX_PAGE = DOCS / "how-to" / "rehearse.md"
_BOX = re.compile(r"<!-- commands: (box[^>]*?) -->\n```bash\n(.*?)```", re.S)


def offline_blocks() -> list[tuple[str, str]]:
    """``(page, block)`` of every offline block of the tutorials and how-to guides."""
    out = []
    for folder in ("tutorials", "how-to"):
        for page in sorted((DOCS / folder).glob("*.md")):
            out += [(f"{folder}/{page.name}", block) for block in _OFFLINE.findall(page.read_text())]
    return out


def box_blocks() -> list[tuple[str, str]]:
    """``(marker, block)`` of every box block of the rehearse guide."""
    return _BOX.findall(BOX_PAGE.read_text())
