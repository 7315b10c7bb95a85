"""The folders this project ships beside its packages, and where an image's ``context`` is.

:data:`ROOT` is laid out like this repository in a checkout and in an installed package (``eks_training/`` in
site-packages, ``setup.py``) alike: the images' build folders (:data:`SHIPPED`), the box's pinned Go modules
(:data:`BOX`) and the configuration reference (:data:`REFERENCE`). A ``context`` names a folder of the Pulumi project
(the folder of its ``Pulumi.yaml``); when the project has no such folder, the shipped one of that name is used; the
default ``training`` image is always the shipped one. More: docs/explanation/packaging.md."""

from pathlib import Path

#: This repository (a checkout), or the installed package's folder ``eks_training/``, laid out alike.
ROOT = Path(__file__).resolve().parent.parent
#: What the packages' import names start with: ``""`` in a checkout (``components``, ``stacks``), ``"eks_training."``
#: installed (``eks_training.components``, ``eks_training.stacks``: setup.py). A module name built at run time is
#: ``PREFIX + "stacks.<module>"``.
PREFIX = __name__[: __name__.rindex("stacks.")]
#: The folders shipped for the images, relative to :data:`ROOT`.
SHIPPED: tuple[str, ...] = ("training", "images/nccl-tests", "images/horovod", "images/tensorflow")
#: The image every stack has: built from the repository's training/ folder; it also runs the
#: project's helpers (dataset staging, the all-reduce check, waits, code download, TensorBoard).
TOOLBOX_IMAGE = "training"
#: The box's Go modules, one folder each (``go.mod``, ``go.sum``, ``.go`` files).
BOX = ROOT / "box"
#: The configuration reference: every key with its type, default, allowed values and meaning (``stacks.docs``).
REFERENCE = ROOT / "docs" / "reference" / "configuration.md"


def shipped(folder: str) -> Path:
    """A shipped folder (``training``, ``images/horovod``...)."""
    return ROOT / folder


def context_folder(context: str, project_dir: Path, *, default: bool = False) -> Path:
    """The folder an image's ``context`` names: in the project (``project_dir``), else a shipped one of that name;
    ``default`` (the toolbox image a stack does not name) is always the shipped one. A folder that exists nowhere is
    returned in the project, where the configuration's rules report it."""
    own = project_dir / context
    if default or (not own.is_dir() and context in SHIPPED):
        return shipped(context)
    return own


__all__ = ["BOX", "PREFIX", "REFERENCE", "ROOT", "SHIPPED", "TOOLBOX_IMAGE", "context_folder", "shipped"]
