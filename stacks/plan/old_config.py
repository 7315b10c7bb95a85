"""The old configuration ``python -m stacks plan --from OLD`` compares with: a stack file's path, or a git revision
(``REV`` reads ``Pulumi.<NAME>.yaml`` as it was at that revision, with ``git show REV:<path>``). A minor the old file
leaves unset is that revision's default, read from its catalog.
"""

import io
import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import yaml

from components.catalog.platform import (
    DEFAULT_KUBERNETES_VERSION,
    minor_number,
)
from stacks.bundle import ROOT
from stacks.config import TOOLBOX_IMAGE, ConfigError, StackConfig, load_config
from stacks.config.cluster import support_windows_ignored
from stacks.plan import Plan, build_plan
from stacks.plan.job_changes import helpers
from stacks.plan.minors import CLUSTER_KEY, VERSION_KEY, leaves_minor_unset, minor_step, with_minor
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
    unseen: tuple[str, ...] = ()
    """The jobs whose image or code folder, or the bundled image their helper containers run, was read as it is now,
    not at the revision (:func:`folders_in_tree`): a change there starts them again, which the comparison cannot
    see."""
    project_changed: bool = False
    """This project's own files differ between the revision and the working folder (:func:`project_changed`)."""


def read_old_config(old: str, stack: str, stack_file: Optional[Path], pinned: Optional[str] = None) -> OldConfig:
    """The old configuration ``--from`` names: a stack file's path, else a git revision of the stack's file. A minor
    left unset is the default of that revision (:func:`default_minor_at`), else today's (:func:`_assumed_minor`), with
    a note saying which; ``pinned``: the minor the new stack file sets, if it sets one."""
    try:
        path = (stack_file or stack_file_for(stack)).resolve()
    except StackFileError as exc:
        raise StackLoadError(f"error: {exc}") from exc
    if Path(old).is_file():
        try:
            old_path, config = read_stack_config(stack, Path(old))
        except StackFileError as exc:
            raise StackLoadError(f"error: --from {old}: {exc}") from exc
        notes: tuple[str, ...] = (
            f"{old} is a file: the image and code folders are read as they are now, so a change to them since does "
            "not show here (a git revision reads them as it had them; the preview shows the Jobs they replace)",
        )
        if not _sets_minor(config):
            hint = (
                "; if the running cluster runs another minor, set it there (or give the git revision deployed, whose "
                "default is read from its catalog)"
            )
            config, note = _assumed_minor(config, str(old), pinned, hint)
            notes += (note,)
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
    head = _head_note(path.parent, old, rel.as_posix())
    if _sets_minor(config):
        return OldConfig(label, path, config, head, revision=old, repository=repository)
    catalog = (rel.parent / PLATFORM_SOURCE).as_posix()
    minor = default_minor_at(path.parent, catalog, old)
    if minor is None:
        config, note = _assumed_minor(
            config, f"{label} (whose {catalog} at {old} cannot be read for the default then)", pinned
        )
        return OldConfig(label, path, config, (*head, note), revision=old, repository=repository)
    note = f"{label} does not set {VERSION_KEY}: {minor}, the default at {old}" + (
        f", and the default now is {DEFAULT_KUBERNETES_VERSION}" if minor != DEFAULT_KUBERNETES_VERSION else ""
    )
    return OldConfig(label, path, _with_minor(config, minor), (*head, note), revision=old, repository=repository)


def _assumed_minor(
    config: dict[str, Any], label: str, pinned: Optional[str], hint: str = ""
) -> tuple[dict[str, Any], str]:
    """An old configuration whose minor nothing names (``label`` says which): read as this version's default, unless
    the new stack file pins a lower minor, which EKS could not move to. Such a pin most likely keeps the minor the
    cluster runs, after a project update raised the default, and the comparison takes it. ``pulumi up`` reads the
    minor from its last update's record, and refuses a move down from there.
    ``hint``: what the note of the default adds."""
    if pinned is None or minor_step(DEFAULT_KUBERNETES_VERSION, pinned) != "down":
        return (
            config,
            f"{label} does not set {VERSION_KEY}: read as this version's default, {DEFAULT_KUBERNETES_VERSION}{hint}",
        )
    return _with_minor(config, pinned), (
        f"{label} does not set {VERSION_KEY}. EKS never moves a cluster down, so this version's default, "
        f"{DEFAULT_KUBERNETES_VERSION}, cannot be what runs under the {pinned} the stack file pins: compared as if the "
        f"cluster runs {pinned} (a pin most often keeps the running minor after a project update raised the default). "
        f"If it runs {DEFAULT_KUBERNETES_VERSION}, `pulumi up` refuses {pinned}; `aws eks describe-cluster --name "
        "CLUSTER --query cluster.version` shows what runs"
    )


def _head_note(folder: Path, old: str, rel: str) -> tuple[str, ...]:
    """A note when revision ``old`` is the checkout's own commit: it then stands for the deployed version only if
    nothing was pulled or committed since (every pull, reset or rebase moves ``ORIG_HEAD``)."""
    commits = [_git(folder, "rev-parse", "--verify", "--quiet", f"{r}^{{commit}}").stdout.strip() for r in (old, "@")]
    if not commits[0] or commits[0] != commits[1] or old == "HEAD":
        return ()
    return (
        f"{old} is HEAD ({commits[0][:12]}): this compares the stack file with its last commit, the version you "
        "deployed only if nothing was pulled or committed since (every pull, reset or rebase moves ORIG_HEAD); "
        f"find the deployed commit with `git reflog` or `git log -- {rel}`",
    )


#: The files and folders of this project (under :data:`~stacks.bundle.ROOT`) whose change makes a new version of it:
#: its packages, the program and the providers' pins. Not its images' folders (:data:`~stacks.bundle.SHIPPED`):
#: the old configuration reads them at the revision (:func:`tree_at`), so what they change shows.
PROJECT_PATHS = ("components", "stacks", "provider", "__main__.py", "requirements.txt")


def project_changed(repository: Path, revision: str) -> bool:
    """Whether this project's own files (:data:`PROJECT_PATHS`) differ between git revision ``revision`` and the
    working folder, as after a ``git pull``: both configurations are then planned with the new version, which cannot
    show what the new version itself changes. ``False`` where git does not hold them (an installed library)."""
    rel = _inside(ROOT, repository)
    if rel is None:
        return False
    done = _git(repository, "diff", "--quiet", revision, "--", *((rel / f).as_posix() for f in PROJECT_PATHS))
    return done.returncode == 1


#: What a comparison with a revision of another version of this project cannot see (:func:`project_changed`).
PROJECT_CHANGED_NOTE = (
    "{label}: this project's code differs between {revision} and the working folder (a new version of it), and "
    "both stack files are planned with the new version: what the new version itself changes (the node groups' "
    "launch templates, add-on and chart pins, the jobs' pod templates) does not show here, and the old jobs' output "
    "folders it names may not be the ones they run in. `pulumi preview` compares with what the last update recorded "
    "and shows those; `pulumi stack output jobs` has the folders the jobs run in"
)


def plan_old(old: str, stack: str, stack_file: Optional[Path], pinned: Optional[str] = None) -> tuple[OldConfig, Plan]:
    """The old configuration and its plan, validated with today's rules (:class:`StackLoadError` otherwise), but not
    today's support windows: its minor was supported when it was deployed, and a minor that left support since is
    the one an upgrade moves from. A git revision is planned in its own files (:func:`tree_at`), so its image tags and
    code hashes, and with them its run ids, are those it deployed. ``pinned``: the minor the new stack file sets, if
    it sets one (:func:`read_old_config`)."""
    read = read_old_config(old, stack, stack_file, pinned)
    project = project_name(read.path)
    notes = list(read.notes)
    now: set[str] = set()  # the image and job names whose folders are read as they are now
    with tempfile.TemporaryDirectory(prefix="eks-training-from-") as scratch:
        where = read.path.parent.resolve()
        tree = None
        if read.revision is not None and read.repository is not None:
            folders = [where, ROOT]  # the project's (its image and code folders are in it), the shipped ones
            tree, left_out, why = tree_at(read.repository, read.revision, Path(scratch), folders)
            if tree is None:
                notes.append(f"{read.label}: {why}; its image and code folders are read as they are now")
                now.add("*")
            else:
                where = tree / where.relative_to(read.repository)
        try:
            with support_windows_ignored():
                cfg = load_config(project, stack, read.config, project_dir=where)
                if tree is not None and read.repository is not None:
                    cfg, moved, names = folders_in_tree(cfg, read.repository, tree, left_out, read.label)
                    notes += moved
                    now |= names
                plan = build_plan(cfg)
        except ConfigError as exc:
            said = "".join(f"\nnote: {n}" for n in notes)
            raise StackLoadError(f"the old configuration ({read.label}) does not load: {exc.offline}{said}") from exc
    unseen = tuple(
        name
        for name, job in plan.jobs.items()
        if now & {"*", f"image {job.config.image}", f"job {name}"} or (f"image {TOOLBOX_IMAGE}" in now and helpers(job))
    )
    changed = read.revision is not None and read.repository is not None and project_changed(read.repository, old)
    if changed:
        notes.append(PROJECT_CHANGED_NOTE.format(label=read.label, revision=old))
    return replace(read, notes=tuple(notes), unseen=unseen, project_changed=changed), plan


def tree_at(
    repository: Path, revision: str, scratch: Path, folders: Sequence[Path]
) -> tuple[Optional[Path], list[Path], str]:
    """The repository's files under ``folders`` (those inside it) at git revision ``revision``, unpacked under
    ``scratch`` (``git archive``), with the paths left out (links out of the tree, which tarfile's data filter
    refuses); or ``None`` and why not."""
    data_filter = getattr(tarfile, "data_filter", None)  # Python 3.11.4 and later
    if data_filter is None:
        return None, [], "this Python's tarfile has no data filter (3.11.4 and later have it)"
    paths = sorted({rel.as_posix() or "." for f in folders if (rel := _inside(f, repository)) is not None})
    archive = _git_bytes(repository, "archive", "--format=tar", revision, "--", *paths)
    if archive is None:
        return None, [], f"git archive {revision} failed"
    tree = scratch / "tree"
    left_out: list[str] = []

    def safe(member: tarfile.TarInfo, path: str) -> Optional[tarfile.TarInfo]:
        try:
            return data_filter(member, path)
        except tarfile.FilterError:
            left_out.append(member.name)
            return None

    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter=safe)
    return tree, [tree / name for name in left_out], ""


def folders_in_tree(
    cfg: StackConfig, repository: Path, tree: Path, left_out: Sequence[Path], label: str
) -> tuple[StackConfig, list[str], set[str]]:
    """``cfg`` (loaded in ``tree``, the repository's files at a revision) with every image and code folder read in
    ``tree``, the files git does not track copied in from the working folder as they are now; and a note for each
    folder read as it is now instead (outside the repository, absent at the revision, or holding a path of
    ``left_out``), with its name (``image NAME``, ``job NAME``)."""
    notes: list[str] = []
    now: set[str] = set()

    def at(folders: Mapping[str, Path], what: str) -> dict[str, Path]:
        out = {}
        for name, folder in folders.items():
            rel = _inside(folder, tree)
            if rel is None and (rel := _inside(folder, repository)) is None:
                notes.append(
                    f"{label}: {what} {name}'s folder {folder} is outside the repository, so it is read as it is "
                    "now: a change to it does not show here (the preview shows the Jobs it replaces)"
                )
                now.add(f"{what} {name}")
                out[name] = folder
                continue
            copy = tree / rel
            if not copy.is_dir() or any(p == copy or copy in p.parents for p in left_out):
                notes.append(f"{label}: {what} {name}'s folder {rel.as_posix() or '.'} is read as it is now")
                now.add(f"{what} {name}")
                out[name] = repository / rel
                continue
            _untracked_into(repository, rel, tree)
            out[name] = copy
        return out

    images, code = at(cfg.image_folders, "image"), at(cfg.code_folders, "job")
    return replace(cfg, image_folders=images, code_folders=code), notes, now


def _inside(folder: Path, top: Path) -> Optional[Path]:
    try:
        return folder.resolve().relative_to(top.resolve())
    except ValueError:
        return None


def _untracked_into(repository: Path, rel: Path, tree: Path) -> None:
    """The files under ``rel`` that git does not track (ignored ones too: a cache, a build's output) copied from the
    working folder into ``tree``: they were there when the revision was deployed as far as anyone can tell, and a
    folder is hashed with them."""
    listed = _git_bytes(repository, "ls-files", "-z", "--others", "--", rel.as_posix() or ".")
    for name in (listed or b"").decode(errors="surrogateescape").split("\0"):
        source, target = repository / name, tree / name
        if name and not target.exists() and not target.is_symlink() and (source.is_file() or source.is_symlink()):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)


def _git_bytes(folder: Path, *args: str) -> Optional[bytes]:
    """git's standard output, or ``None`` when it fails."""
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, check=False)
    return done.stdout if done.returncode == 0 else None
