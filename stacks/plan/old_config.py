"""The old configuration ``python -m stacks plan --from OLD`` compares with: a stack file's path, or a git revision
(``REV`` reads ``Pulumi.<NAME>.yaml`` as it was at that revision, with ``git show REV:<path>``). A minor the old file
leaves unset is that revision's default, read from its catalog.
"""

import io
import re
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from components.catalog.platform import (
    DEFAULT_KUBERNETES_VERSION,
    minor_number,
)
from stacks.config import ConfigError, StackConfig, load_config
from stacks.config.cluster import support_windows_ignored
from stacks.plan import Plan, build_plan
from stacks.plan.minors import CLUSTER_KEY, VERSION_KEY, leaves_minor_unset, with_minor
from stacks.stackfile import (
    StackFileError,
    StackLoadError,
    load_stack_yaml,
    project_config,
    project_name,
    read_stack_config,
    stack_file_for,
)

#: The catalog file that gives this project's default minor (:func:`newest_minor`), as a path in the project's
#: repository: ``--from REV`` reads it at REV when the stack file there leaves the minor unset.
PLATFORM_SOURCE = "components/catalog/platform.py"
_MINOR_ENTRY = re.compile(r'KubernetesVersion\(\s*minor="(\d+\.\d+)"')
#: The default written as a literal, as the catalog once had it.
_DEFAULT_LITERAL = re.compile(r'^DEFAULT_KUBERNETES_VERSION\s*=\s*"(\d+\.\d+)"', re.MULTILINE)


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)


def default_minor_at(folder: Path, catalog: str, rev: str) -> Optional[str]:
    """This project's default Kubernetes minor at git revision ``rev`` of the repository holding ``folder``, as its
    catalog (``catalog``, a path from the repository's top) gives it (:func:`newest_minor`); ``None`` where that
    revision has no catalog to read (another project's repository, with this library installed)."""
    shown = _git(folder, "show", f"{rev}:{catalog}")
    return newest_minor(shown.stdout) if shown.returncode == 0 else None


def newest_minor(catalog_source: str) -> Optional[str]:
    """The default minor the source of :data:`PLATFORM_SOURCE` gives: its ``DEFAULT_KUBERNETES_VERSION`` where that is
    a literal, else the newest minor it lists; ``None`` if it gives neither."""
    literal = _DEFAULT_LITERAL.search(catalog_source)
    if literal:
        return literal.group(1)
    minors = _MINOR_ENTRY.findall(catalog_source)
    return max(minors, key=minor_number) if minors else None


def _sets_minor(config: dict[str, Any]) -> bool:
    return not leaves_minor_unset(config.get(CLUSTER_KEY))


def _with_minor(config: dict[str, Any], minor: str) -> dict[str, Any]:
    return {**config, CLUSTER_KEY: with_minor(config.get(CLUSTER_KEY), minor)}


@dataclass(frozen=True)
class OldConfig:
    """The configuration ``--from`` names, as :func:`read_old_config` read it."""

    label: str
    path: Path
    """The stack file it stands for (the new one's path for a git revision)."""
    config: dict[str, Any]
    notes: tuple[str, ...] = ()
    """How an unset ``cluster.kubernetesVersion`` was read."""
    revision: Optional[str] = None
    """The git revision it was read at (``None``: a file's path)."""
    repository: Optional[Path] = None
    """The top folder of the git repository that holds the stack file, for a revision."""


def read_old_config(old: str, stack: str, stack_file: Optional[Path]) -> OldConfig:
    """The old configuration ``--from`` names: a stack file's path, else a git revision of the stack's file. A minor
    left unset is the default of that revision (:func:`default_minor_at`), else today's, with a note saying which."""
    try:
        path = (stack_file or stack_file_for(stack)).resolve()
    except StackFileError as exc:
        raise StackLoadError(f"error: {exc}") from exc
    if Path(old).is_file():
        try:
            old_path, config = read_stack_config(stack, Path(old))
        except StackFileError as exc:
            raise StackLoadError(f"error: --from {old}: {exc}") from exc
        notes: tuple[str, ...] = ()
        if not _sets_minor(config):
            notes = (
                f"{old} does not set {VERSION_KEY}: read as this version's default, {DEFAULT_KUBERNETES_VERSION}; "
                "if the running cluster runs another minor, set it there (or give the git revision deployed, whose "
                "default is read from its catalog)",
            )
        return OldConfig(str(old), old_path, config, notes)
    top = _git(path.parent, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise StackLoadError(
            f"error: --from {old}: not a file, and {path.parent} is not in a git repository; give the old stack file's "
            "path, or a git revision of a stack file that git tracks"
        )
    rel = path.relative_to(Path(top.stdout.strip()).resolve())
    shown = _git(path.parent, "show", f"{old}:{rel.as_posix()}")
    if shown.returncode != 0:
        raise StackLoadError(
            f"error: --from {old}: not a file, and git has no {rel.as_posix()} at revision {old!r} "
            f"({shown.stderr.strip()}); give a revision where the stack file exists (git log -- {rel.as_posix()}), "
            "or the old file's path"
        )
    try:
        data = load_stack_yaml(shown.stdout) or {}
    except yaml.YAMLError as exc:
        raise StackLoadError(f"error: --from {old}: cannot read {rel.as_posix()} at {old}: {exc}") from exc
    values = data.get("config") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise StackLoadError(f"error: --from {old}: {rel.as_posix()} at {old} has no config: mapping")
    label = f"{old}:{rel.as_posix()}"
    config = {**project_config(path.parent / "Pulumi.yaml"), **values}
    repository = Path(top.stdout.strip()).resolve()
    if _sets_minor(config):
        return OldConfig(label, path, config, revision=old, repository=repository)
    catalog = (rel.parent / PLATFORM_SOURCE).as_posix()
    minor = default_minor_at(path.parent, catalog, old)
    if minor is None:
        return OldConfig(
            label,
            path,
            config,
            (
                f"{label} does not set {VERSION_KEY}, and {catalog} at {old} cannot be read for the default "
                f"then: read as this version's default, {DEFAULT_KUBERNETES_VERSION}",
            ),
            revision=old,
            repository=repository,
        )
    note = f"{label} does not set {VERSION_KEY}: {minor}, the default at {old}" + (
        f", and the default now is {DEFAULT_KUBERNETES_VERSION}" if minor != DEFAULT_KUBERNETES_VERSION else ""
    )
    return OldConfig(label, path, _with_minor(config, minor), (note,), revision=old, repository=repository)


def plan_old(old: str, stack: str, stack_file: Optional[Path]) -> tuple[OldConfig, Plan]:
    """The old configuration and its plan, validated with today's rules (:class:`StackLoadError` otherwise), but not
    today's support windows: its minor was supported when it was deployed, and a minor that left support since is
    the one an upgrade moves from."""
    read = read_old_config(old, stack, stack_file)
    project = project_name(read.path)
    with tempfile.TemporaryDirectory(prefix="eks-training-from-") as scratch:
        try:
            with support_windows_ignored():
                cfg = load_config(project, stack, read.config, project_dir=read.path.parent.resolve())
                if read.revision is not None and read.repository is not None:
                    cfg = folders_at(cfg, read.repository, read.revision, Path(scratch))
                plan = build_plan(cfg)
        except ConfigError as exc:
            notes = "".join(f"\nnote: {n}" for n in read.notes)
            raise StackLoadError(f"the old configuration ({read.label}) does not load: {exc}{notes}") from exc
    return read, plan


def folders_at(cfg: StackConfig, repository: Path, revision: str, scratch: Path) -> StackConfig:
    """``cfg`` with its image build folders and jobs' code folders as git revision ``revision`` had them (copied into
    ``scratch``): the old plan's image tags and code hashes, so its run ids, are those that revision deployed. A folder
    outside the repository, or one the revision lacks, is read as it is now."""
    return replace(
        cfg,
        image_folders=_at(cfg.image_folders, repository, revision, scratch / "images"),
        code_folders=_at(cfg.code_folders, repository, revision, scratch / "code"),
    )


def _at(folders: Mapping[str, Path], repository: Path, revision: str, scratch: Path) -> dict[str, Path]:
    out = {}
    for name, folder in folders.items():
        out[name] = folder
        try:
            rel = folder.resolve().relative_to(repository)
        except ValueError:
            continue
        tree = _git_bytes(repository, "archive", "--format=tar", revision, "--", rel.as_posix() or ".")
        if tree is None:
            continue
        try:
            with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
                tar.extractall(scratch / name, filter="data")
        except (tarfile.TarError, OSError):  # a link out of the folder, say: read it as it is now
            continue
        out[name] = scratch / name / rel
    return out


def _git_bytes(folder: Path, *args: str) -> Optional[bytes]:
    """git's standard output, or ``None`` when it fails (a path the revision lacks)."""
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, check=False)
    return done.stdout if done.returncode == 0 else None
