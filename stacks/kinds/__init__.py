"""The kinds of job, as plugins: one module per kind (:mod:`~stacks.kinds.pytorch`, :mod:`~stacks.kinds.mpi`,
:mod:`~stacks.kinds.tensorflow`, :mod:`~stacks.kinds.command`) holding everything that kind means
(:class:`~stacks.kinds.base.JobKind`), one registry (:data:`KINDS`). The config models, the rules, the plan, the
composition, the outputs, the collector, the plan report, the benchmark's summary and the local runner read the
registry; none names a kind.

Adding a kind: a module with a :class:`JobKind` subclass, one line below (or :func:`register` from a program of one's
own), a preset and its tests (ARCHITECTURE.md, "Recipes").
"""

from stacks.kinds import command, mpi, pytorch, tensorflow
from stacks.kinds.base import (
    BuildContext,
    JobComponent,
    JobImage,
    JobKind,
    JobSettings,
    LocalContext,
    LocalMachine,
    LocalProcesses,
    OwnedField,
    PlannedJob,
)

#: Kind name -> kind, in the order the documentation lists them.
KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    """Add ``kind`` to :data:`KINDS` (its name must be new, and the facts its messages need set); returns it."""
    if kind.name in KINDS:
        raise ValueError(f"job kind {kind.name!r} is registered already")
    missing = [
        fact
        for fact, lacking in (
            ("name", not kind.name),
            ("summary", not getattr(kind, "summary", "")),
            ("fixed_size (why it cannot change size: it is not elastic)", not kind.elastic and not kind.fixed_size),
            (
                "example_image (a build folder with its image_package)",
                bool(kind.image_package) and not kind.example_image,
            ),
        )
        if lacking
    ]
    if missing:
        raise ValueError(
            f"job kind {kind.name!r} lacks {', '.join(missing)}: set them on its class (stacks/kinds/base.py)"
        )
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind :func:`register` added (a test's toy kind)."""
    del KINDS[name]


def kind_names() -> str:
    """The registered kinds' names, for messages."""
    return ", ".join(KINDS)


register(pytorch.KIND)
register(mpi.KIND)
register(tensorflow.KIND)
register(command.KIND)

__all__ = [
    "KINDS",
    "BuildContext",
    "JobComponent",
    "JobImage",
    "JobKind",
    "JobSettings",
    "LocalContext",
    "LocalMachine",
    "LocalProcesses",
    "OwnedField",
    "PlannedJob",
    "kind_names",
    "register",
    "unregister",
]
