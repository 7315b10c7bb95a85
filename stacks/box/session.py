"""One box for one run, in the steps every user of the box takes: build, up, nodes, provisioner, run, stop, down.

``python -m stacks rehearse`` (:mod:`stacks.box.rehearse_cli`), ``python -m stacks box bench`` (:mod:`stacks.box.bench`)
and the cluster tier (``tests/cluster/support.py``) each run a stack's steps through a :class:`Session`::

    with Session.build(name, workdir, log=log) as session:
        session.up()
        session.nodes(plan_nodes(plan, region))
        session.rehearse(plan, steps_of(registrations))
        session.run(timeout_s=300)

Leaving the ``with`` block stops the operators the rehearsal started and deletes the box, or, for a kept session,
records the operators (:mod:`stacks.box.operators`) and leaves both running.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, ContextManager, Optional, Sequence

from stacks.box import build as box_build
from stacks.box import operators
from stacks.box.cluster import Box
from stacks.box.devices import Registrar
from stacks.box.provisioner import provisioner_for
from stacks.box.rehearse import Rehearsal, Step
from stacks.plan import Plan
from stacks.yaml_text import dump_yaml_documents


def ready_nodes(box: Box) -> set[str]:
    """The names of the box's Ready nodes (one list of the nodes)."""
    return {
        n["metadata"]["name"]
        for n in box.get("nodes")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or [])
    }


#: Nodes one ``kubectl create`` makes, one after another (258 took 34 s on a loaded machine), and how many of those
#: processes run at once.
NODES_PER_PROCESS = 32
CREATE_PROCESSES = 8


def create_nodes(box: Box, nodes: Sequence[dict[str, Any]], timeout_s: float = 120.0) -> None:
    """Create ``nodes`` (with their status: a Node is the one kind whose create keeps it) and wait until all are
    Ready (the kwok controller initialises them), polling the node list: one request a look, where ``kubectl wait
    --all`` waits for one node after another."""
    if not nodes:
        return
    processes = min(CREATE_PROCESSES, -(-len(nodes) // NODES_PER_PROCESS))
    with ThreadPoolExecutor(processes) as pool:
        done = [
            pool.submit(
                box.kubectl, "create", "-f", "-", input=dump_yaml_documents(nodes[i::processes]), timeout_s=timeout_s
            )
            for i in range(processes)
        ]
        for future in done:
            future.result()  # a refusal raises BoxError
    names = {n["metadata"]["name"] for n in nodes}
    box.wait_for(
        lambda: names <= ready_nodes(box), timeout_s=timeout_s, interval_s=0.5, what=f"{len(nodes)} nodes Ready"
    )


class Session:
    """``box`` and the one rehearsal run on it; a context manager whose exit stops and deletes both (or, with
    ``keep``, records the operators and leaves them and the box up)."""

    def __init__(self, box: Box, *, keep: bool = False, rehearsal: Optional[Rehearsal] = None) -> None:
        self.box = box
        self.keep = keep
        self.rehearsal = rehearsal

    @classmethod
    def build(
        cls, name: str, workdir: Path, *, keep: bool = False, log: Callable[[str], None] = lambda message: None
    ) -> "Session":
        """Build (or reuse) every pinned binary (:func:`stacks.box.build.build`) for a box named ``name``; raises
        :class:`~stacks.box.build.BoxBuildError`."""
        return cls(Box(name=name, workdir=workdir, binaries=box_build.build(log=log)), keep=keep)

    def up(self) -> float:
        """Stop the operators a kept box of the same name left running, bring the box up afresh; returns the
        seconds ``up`` took."""
        operators.stop_recorded(self.box)
        start = time.monotonic()
        self.box.up()
        return time.monotonic() - start

    def nodes(self, nodes: Sequence[dict[str, Any]], timeout_s: float = 120.0) -> float:
        """:func:`create_nodes`; returns the seconds until every node was Ready."""
        start = time.monotonic()
        create_nodes(self.box, nodes, timeout_s)
        return time.monotonic() - start

    def rehearse(self, plan: Plan, steps: list[Step], *, region: Optional[str] = None, **kwargs: Any) -> Rehearsal:
        """The rehearsal of ``steps`` on the box, with the cluster autoscaler's stand-in when ``plan`` needs one
        (:func:`stacks.box.provisioner.provisioner_for`, in ``region``, default the plan's) unless ``kwargs`` give
        ``provisioner``; ``kwargs`` are :class:`~stacks.box.rehearse.Rehearsal`'s."""
        if "provisioner" not in kwargs:
            kwargs["provisioner"] = provisioner_for(self.box, plan, region or plan.config.region)
        self.rehearsal = Rehearsal(self.box, steps, **kwargs)
        return self.rehearsal

    def run(
        self,
        timeout_s: float,
        *watching: ContextManager[Any],
        stuck: Optional[Callable[[list[str]], bool]] = None,
    ) -> Optional[BaseException]:
        """Run the rehearsal (:meth:`Rehearsal.run`) while the device plugins' stand-in registers devices
        (:class:`~stacks.box.devices.Registrar`) and ``watching`` (a timeline recorder, the pods' logs) run; raises
        :class:`~stacks.box.rehearse.RehearsalError`. Returns the registrar's error (``None`` when it had none)."""
        if self.rehearsal is None:
            raise RuntimeError("Session.run before Session.rehearse")
        with ExitStack() as stack:
            registrar = stack.enter_context(Registrar(self.box))
            for watcher in watching:
                stack.enter_context(watcher)
            self.rehearsal.run(self.box.binaries, timeout_s=timeout_s, stuck=stuck)
        return registrar.error

    def close(self) -> None:
        """Kept: record the operators the rehearsal runs (the box is left up). Otherwise stop them and delete the
        box."""
        if self.keep and self.rehearsal is not None and self.box.home.exists():
            operators.record(self.box, self.rehearsal.operators)
            return
        if self.rehearsal is not None:
            self.rehearsal.stop_operator()
        self.box.down()

    def __enter__(self) -> "Session":
        return self

    def __exit__(
        self,
        kind: Optional[type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()
