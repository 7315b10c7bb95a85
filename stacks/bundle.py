"""The build folders this project ships for its images, and where an image's ``context`` is.

A ``context`` names a folder of the Pulumi project (the folder of its ``Pulumi.yaml``: the program's working folder
under ``pulumi up``, the stack file's folder for the command-line tools). When the project has no such folder, the
folders this package ships are used: ``training`` (the toolbox image: the trainer, the launcher, staging, the
waits) and ``images/nccl-tests``, ``images/horovod``, ``images/tensorflow``. They are this repository's folders in a
checkout and ``stacks/_shipped/`` in an installed package (``setup.py`` installs them there). The default
``training`` image, which a stack does not name, is always the shipped one.
"""

from pathlib import Path

#: This repository (a checkout), or site-packages (an installed package).
REPO = Path(__file__).resolve().parent.parent
#: Where an installed package keeps the shipped folders.
INSTALLED = Path(__file__).resolve().parent / "_shipped"
#: The folders shipped for the images, relative to the repository.
SHIPPED: tuple[str, ...] = ("training", "images/nccl-tests", "images/horovod", "images/tensorflow")


def shipped_root() -> Path:
    """The folder holding :data:`SHIPPED`: the repository in a checkout, :data:`INSTALLED` in an install."""
    return REPO if (REPO / "training" / "Dockerfile").is_file() else INSTALLED


def shipped(folder: str) -> Path:
    """A shipped folder (``training``, ``images/horovod``...)."""
    return shipped_root() / folder


def context_folder(context: str, project_dir: Path, *, default: bool = False) -> Path:
    """The folder an image's ``context`` names: in the project (``project_dir``), else a shipped one of that name;
    ``default`` (the toolbox image a stack does not name) is always the shipped one. A folder that exists nowhere is
    returned in the project, where the configuration's rules report it."""
    own = project_dir / context
    if default or (not own.is_dir() and context in SHIPPED):
        return shipped(context)
    return own


__all__ = ["INSTALLED", "REPO", "SHIPPED", "context_folder", "shipped", "shipped_root"]
