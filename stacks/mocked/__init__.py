"""The Pulumi program evaluated offline under the mocks (:mod:`stacks.mocked.account`, :mod:`stacks.mocked.monitor`):
what ``python -m stacks plan``, ``python -m stacks rehearse`` and the test harness evaluate."""

import logging
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import pulumi
from pulumi.runtime import mocks as pmocks
from pulumi.runtime import resource as _sdk_resource
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from stacks.bundle import PREFIX, ROOT
from stacks.config import NAMESPACE
from stacks.config.namespaces import as_passed
from stacks.mocked.account import (
    ACCOUNT,
    CAPACITY_BLOCKS,
    JOB_STATUS,
    PARTITION_PREFIXES,
    REGION,
    SCHEDULED_BLOCK,
    STACK_OUTPUTS,
    ZONE_IDS,
    ZONES,
    TrainingMocks,
    partition_of,
    started_blocks,
    zones_of,
)
from stacks.mocked.monitor import UNKNOWN, RecordingMonitor, Registration
from stacks.stackfile import plan_stack, project_name, read_stack_config

if TYPE_CHECKING:
    from stacks.plan import Plan


def _no_stack_traces() -> None:
    """The SDK walks the Python stack on every registration to send the engine the source position of the resource
    (``_get_stack_trace``): a sixth of a program's evaluation time here, and nothing the mocks or the tests read.
    Turned off by :func:`evaluate` only, so importing :class:`TrainingMocks` changes nothing in the SDK."""
    _sdk_resource._get_stack_trace = lambda: source_pb2.StackTrace()


#: This repository, or the installed package's folder ``eks_training/`` (its ``__main__.py`` is the program).
REPO = ROOT
PROJECT = "eks-training"


@dataclass
class Evaluation:
    """What one evaluation of the program registered and exported (``error``: what it raised, with
    ``expect_error``)."""

    registrations: list[Registration]
    outputs: dict[str, Any]
    invokes: list[tuple[str, dict[str, Any]]]
    error: Optional[BaseException] = None
    reads: list[tuple[str, str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What the program logged as warnings (``pulumi.log.warn``: what ``pulumi up`` prints under Diagnostics)."""


#: The organization the engine names when the backend has none (the DIY backend's; stacks.last_update reads it too).
ORGANIZATION = "organization"


class _Warnings(logging.Handler):
    """Collects the warnings the program logs through the mocks' engine."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.messages.append(record.getMessage())


def evaluate(
    stack: str,
    config: Mapping[str, Any],
    *,
    preview: bool = False,
    main: Path = REPO / "__main__.py",
    expect_error: bool = False,
    project: str = PROJECT,
    project_dir: Path = REPO,
    replaced: Optional[Callable[[str, str], bool]] = None,
    secret_keys: Sequence[str] = (),
) -> Evaluation:
    """Evaluate ``main`` for ``stack`` with ``config`` (the configuration ``pulumi up`` would pass: keys
    ``<namespace>:<key>``) under the mocks; ``project`` is the Pulumi project's name, ``project_dir`` the folder the
    program runs in (that of its Pulumi.yaml, where the folders a stack names are: image contexts, code). The program
    raising fails the call unless ``expect_error`` (then it is :attr:`Evaluation.error`). In a preview, ``replaced``
    (type, name) picks the resources an update would replace: only theirs are unknown (:class:`TrainingMocks`).
    ``secret_keys``: the settings Pulumi holds as secrets (``pulumi config set --secret``)."""
    _no_stack_traces()
    cfg = dict(config)
    # the configuration the program sees, as `pulumi up` passes it (strings, objects as JSON)
    pulumi.runtime.set_all_config({k: as_passed(v) for k, v in cfg.items()}, list(secret_keys))
    mocks = TrainingMocks(
        preview, str(cfg.get("aws:region", REGION)), f"{ORGANIZATION}/{project}/{stack}", replaced if preview else None
    )
    monitor = RecordingMonitor(mocks)
    # A fresh root Stack per run: set_mocks reuses an existing one, whose outputs would carry over.
    pulumi.runtime.settings.ROOT.set(None)
    warnings = _Warnings()
    logger = logging.getLogger(f"{__name__}.engine")  # its messages still reach the root logger, as before
    logger.handlers[:] = [warnings]
    pmocks.set_mocks(
        mocks, project=project, stack=stack, preview=preview, monitor=monitor, logger=logger, organization=ORGANIZATION
    )
    settings = pulumi.runtime.settings.SETTINGS
    settings.root_directory = str(project_dir)  # the folder of Pulumi.yaml, as the language host passes it
    settings.rpc_manager.clear()
    settings.outputs.clear()

    exported: dict[str, Any] = {}

    # The program's folder is on the path, as under `pulumi up` (its own modules, a user's `components/`); in a
    # checkout the repository comes first, whose program imports `stacks`. An installed package's modules import
    # `eks_training.*` (setup.py), so nothing of it goes on the path to shadow the project's own packages.
    paths = [str(project_dir)] if PREFIX else [str(REPO), str(project_dir)]

    def program() -> None:
        cwd = os.getcwd()
        sys.path[:0] = paths
        os.chdir(project_dir)
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            os.chdir(cwd)
            for path in paths:
                sys.path.remove(path)

    error: Optional[BaseException] = None
    try:
        _sync_await(run_pulumi_func(program))
    except BaseException as exc:  # noqa: BLE001 - reported to the caller
        if not expect_error:
            raise
        error = exc
    root = pulumi.runtime.settings.get_root_resource()
    if error is None and root is not None:
        for k, v in (getattr(root, "outputs", None) or {}).items():
            exported[k] = v
    return Evaluation(
        list(monitor.registrations), exported, list(mocks.invokes), error, list(monitor.reads), warnings.messages
    )


def evaluate_stack(
    stack: str, stack_file: Optional[Path], edit: Optional[Callable[[dict[str, Any]], None]] = None
) -> tuple[dict[str, Any], "Plan", Evaluation]:
    """The stack's configuration, plan and offline evaluation (what ``python -m stacks plan`` models and
    ``python -m stacks rehearse`` runs); ``edit`` changes the configuration first, as an edit of the stack file would
    (:func:`stacks.stackfile.plan_stack`); raises :class:`~stacks.stackfile.StackLoadError` for a bad stack file.
    The stack's own project folder is the program's (its ``__main__.py`` when it has one)."""
    config, plan = plan_stack(stack, stack_file, edit=edit)
    return config, plan, evaluate_config(stack, stack_file, config)


def evaluate_config(stack: str, stack_file: Optional[Path], config: Mapping[str, Any]) -> Evaluation:
    """The offline evaluation of the stack's program for ``config``, its configuration as loaded (and planned) by
    :func:`stacks.stackfile.plan_stack`, with preflight off."""
    path, _ = read_stack_config(stack, stack_file)
    project = project_name(path)
    cfg = dict(config)
    # Preflight checks the AWS account (quotas, zones, reservations): there is none here.
    # (its key is eks-training:preflight whatever the project's name: the namespace the program reads)
    cfg[f"{NAMESPACE}:preflight"] = {**(cfg.get(f"{NAMESPACE}:preflight") or {}), "enabled": False}
    folder = path.parent.resolve()
    main = folder / "__main__.py"
    kwargs: dict[str, Any] = {"project": project, "project_dir": folder}
    if main.is_file():
        kwargs["main"] = main
    return evaluate(stack, cfg, **kwargs)


def resolve(value: Any) -> Any:
    """Resolve an Output (or plain value) to a plain value after an evaluation."""
    if isinstance(value, pulumi.Output):
        return _sync_await(value.future())
    return value


__all__ = [
    "ACCOUNT",
    "CAPACITY_BLOCKS",
    "JOB_STATUS",
    "ORGANIZATION",
    "PARTITION_PREFIXES",
    "PROJECT",
    "REGION",
    "REPO",
    "SCHEDULED_BLOCK",
    "STACK_OUTPUTS",
    "UNKNOWN",
    "ZONE_IDS",
    "ZONES",
    "Evaluation",
    "RecordingMonitor",
    "Registration",
    "TrainingMocks",
    "evaluate",
    "evaluate_config",
    "evaluate_stack",
    "partition_of",
    "resolve",
    "started_blocks",
    "zones_of",
]
