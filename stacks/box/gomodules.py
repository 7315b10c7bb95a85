"""Where the Go modules the box's modules (``box/<folder>/go.mod``) select are in the Go module cache, and their
versions: the box reads release manifests, CRDs and charts from them (:mod:`stacks.box.manifests`,
:mod:`stacks.box.kueue`, :mod:`stacks.box.charts`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from stacks.box import build as box_build


class ManifestError(Exception):
    """A release manifest, or the module the box reads it from, cannot be read (the message names which)."""


def _go_list(folder: str, module: str, field: str) -> str:
    """``field`` (``Dir``, ``Version``) of ``module`` as the box module ``folder``'s go.mod selects it ("" if none)."""
    proc = subprocess.run(
        ["go", "list", "-m", "-f", "{{." + field + "}}", module],
        cwd=box_build.MODULES[folder].path,
        capture_output=True,
        text=True,
        env=dict(os.environ, GOFLAGS="-mod=readonly"),
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ManifestError(
            f"box/{folder}/go.mod: no {field} of {module} in the Go module cache: {proc.stderr.strip()}"
        )
    return proc.stdout.strip()


def module_dir(folder: str, module: str) -> Path:
    """Where ``module`` (as the box module ``folder`` selects it) is in the Go module cache."""
    return Path(_go_list(folder, module, "Dir"))


def module_version(folder: str, module: str) -> str:
    """The version of ``module`` the box module ``folder``'s go.mod selects."""
    return _go_list(folder, module, "Version")
