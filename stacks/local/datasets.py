"""The local runner's datasets: each one staged from its source by ``stage_data.py``, as the staging Job does, or a
local folder given with ``--dataset NAME=PATH``, checked and linked where the jobs read it."""

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from components.workloads.staging import staging_command
from stacks.config.datasets import CIFAR10_FILES, CIFAR10_FOLDER, CIFAR10_URL
from stacks.config.jobs import TOOLBOX_IMAGE
from stacks.local.processes import Pod
from stacks.local.report import LocalRunError
from stacks.plan import Plan


def dataset_layout(source: str) -> str:
    """What ``--dataset NAME=PATH`` must hold for a dataset from ``source``."""
    if source == CIFAR10_URL:
        return (
            f"a folder holding {CIFAR10_FOLDER}/ (the folder CIFAR-10's python tarball, {CIFAR10_URL}, extracts to: "
            f"{', '.join(CIFAR10_FILES)}), or that folder itself"
        )
    return f"a folder with the files {source} unpacks to (the job reads them at $DATA_DIR)"


def _stamp() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


class DatasetStaging:
    """The dataset staging of :class:`stacks.local.runner.LocalRunner` (one of its bases): the runner's fields and
    methods it uses are declared here for the type checker."""

    plan: Plan
    work: Path
    repo: Path
    datasets: Mapping[str, Path]

    if TYPE_CHECKING:

        def host_path(self, text: str, app: Path, tmp: Path, workspace: Optional[Path] = None) -> str: ...

        def wait(self, pods: Sequence[Pod], *, timeout_s: float) -> None: ...

        def say(self, text: str) -> None: ...

    def stage(self, name: str) -> None:
        """Put dataset ``name`` where the jobs read it: a given local folder, or staged from its source."""
        ds = self.plan.datasets[name]
        dest = Path(self.host_path(ds.data_dir, self.repo, self.work))
        if name in self.datasets:
            given = self.datasets[name].resolve()
            # a dataset written without `source` is CIFAR-10: a refusal then says where a user's own data goes
            unset = "source" not in ds.config.model_fields_set
            target = self.dataset_target(name, given, ds.config.source, source_unset=unset)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink() and dest.resolve() == target:
                self.say(f"dataset {name}: {given} (given)")
                return
            if dest.is_symlink():
                dest.unlink()
            elif dest.exists():  # staged (or half-staged) from its source earlier: kept aside, not in the way
                aside = dest.with_name(f"{dest.name}.staged-{_stamp()}")
                dest.rename(aside)
                self.say(f"dataset {name}: the copy staged earlier is moved aside to {aside}")
            dest.symlink_to(target, target_is_directory=True)
            self.say(f"dataset {name}: {given} (given)")
            return
        if (earlier := self.given_earlier(name, dest)) is not None:
            self.say(f"dataset {name}: {earlier} (given to an earlier run; --dataset {name}=PATH gives another)")
            return
        if ds.imported:
            raise LocalRunError(
                f"dataset {name} is imported by FSx from {ds.config.source}; give a local copy with "
                f"--dataset {name}=PATH"
            )
        toolbox = self.plan.images[TOOLBOX_IMAGE]
        assert toolbox.context is not None
        command = staging_command(
            ds.config.source, ds.data_dir, md5=ds.config.md5, expected_bytes=ds.config.expected_bytes
        )
        tmp = self.work / "tmp" / f"stage-{name}"
        tmp.mkdir(parents=True, exist_ok=True)
        pod = Pod(
            job=f"stage-{name}",
            index=0,
            argv=[self.host_path(a, Path(toolbox.context), tmp) for a in command],
            env={"HOME": str(tmp)},
            cwd=Path(toolbox.context),
            log=self.work / "logs" / f"stage-{name}.log",
        )
        self.say(f"dataset {name}: staging {ds.config.source} into {dest}")
        try:
            self.wait([pod], timeout_s=60.0 * ds.config.timeout_minutes)
        except LocalRunError as exc:
            raise LocalRunError(
                f"dataset {name}: staging from {ds.config.source} failed: {exc.reason}",
                fix=f"without network, give a local copy with --dataset {name}=PATH "
                f"({dataset_layout(ds.config.source)})",
                log=exc.log,
            ) from exc
        self.say(f"dataset {name}: staged in {dest}")

    def given_earlier(self, name: str, dest: Path) -> Optional[Path]:
        """The folder an earlier run's ``--dataset NAME=PATH`` linked at ``dest``, still there, or None. Staging from
        the source would write into it through the link; a link to a folder that is gone is removed."""
        if not dest.is_symlink():
            return None
        target = dest.resolve()
        if not target.is_dir():
            dest.unlink()
            return None
        if target.parent == (self.work / "datasets").resolve():  # CIFAR-10's batches given as themselves
            return (target / CIFAR10_FOLDER).resolve()
        return target

    def dataset_target(self, name: str, given: Path, source: str, *, source_unset: bool = False) -> Path:
        """The folder ``--dataset NAME=PATH`` stands for, checked: CIFAR-10 (the default source) needs its python
        batches, in PATH/cifar-10-batches-py/ or in PATH itself; any other dataset a folder that is not empty.
        ``source_unset``: the stack file gives the dataset no ``source`` (so it is CIFAR-10)."""
        if not given.is_dir():
            raise LocalRunError(f"--dataset {name}={given}: not a folder; give {dataset_layout(source)}")
        if source != CIFAR10_URL:
            if not any(given.iterdir()):
                raise LocalRunError(f"--dataset {name}={given}: the folder is empty; give {dataset_layout(source)}")
            return given
        for batches in (given / CIFAR10_FOLDER, given):
            if all((batches / f).is_file() for f in CIFAR10_FILES):
                if batches == given:  # the batches themselves: a folder holding them under their own name
                    holder = self.work / "datasets" / name
                    holder.mkdir(parents=True, exist_ok=True)
                    link = holder / CIFAR10_FOLDER
                    if link.is_symlink():
                        link.unlink()
                    link.symlink_to(given, target_is_directory=True)
                    return holder.resolve()
                return given
        missing = [f for f in CIFAR10_FILES if not (given / CIFAR10_FOLDER / f).is_file()]
        own = (
            f". datasets.{name} has no source, so it is CIFAR-10: for your own data, set datasets.{name}.source to "
            "its tarball (s3:// or https://)"
            if source_unset
            else ""
        )
        raise LocalRunError(
            f"--dataset {name}={given}: {', '.join(missing)} missing; give {dataset_layout(source)}{own}"
        )


__all__ = ["DatasetStaging", "dataset_layout"]
