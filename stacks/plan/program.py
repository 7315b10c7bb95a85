"""Which version of this project's program made an update: a digest of its source, recorded in ``deployedVersions``.

The next ``pulumi up`` plans the recorded configuration with the program it runs, so a change of the program itself
(such as a Job's pod template) shows on neither side of its summary; the digest tells it that the program changed,
and the summary then says so (:mod:`stacks.last_update`). The digest is of the files as they run: an edit, or the
same version run from a clone after an installed copy (whose imports are rewritten), reads as another program."""

import functools
import hashlib
from pathlib import Path
from typing import Mapping, Optional

#: How ``deployedVersions`` names the digest of the program that made the update.
PROGRAM_KEY = "program"

#: The folder that holds the ``components`` and ``stacks`` packages (the clone, or ``eks_training`` installed).
_ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def program_digest() -> str:
    """A digest of the program's Python sources (``components`` and ``stacks``), by their paths and contents."""
    h = hashlib.sha256()
    for package in ("components", "stacks"):
        for path in sorted((_ROOT / package).rglob("*.py")):
            h.update(path.relative_to(_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def program_changed(recorded: Optional[Mapping[str, object]]) -> bool:
    """Whether the program differs from the one that made the update whose versions are ``recorded``: its digest is
    another, or the record has none (an older version made it); never without a readable record."""
    return isinstance(recorded, Mapping) and recorded.get(PROGRAM_KEY) != program_digest()
