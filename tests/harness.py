"""Runs the real ``__main__.py`` under Pulumi mocks and records everything it registers.

``run_stack("dev")`` loads ``Pulumi.dev.yaml``, evaluates the program offline and returns a
:class:`Program` with every registered resource: type, name, URN, parent, dependencies,
property dependencies, provider, options and inputs. Duplicate URNs fail the run.

The mocks and the evaluation are the product's (:mod:`stacks.mocked`, which ``python -m stacks.rehearse`` uses too);
this module caches evaluations per test session and adds the tests' views of them.

In preview mode the mocks behave like the engine during ``pulumi preview``: a new resource's id
and computed outputs are unknown (only its inputs come back), so assertions that need resolved
values cannot pass vacuously; tests check relationships through recorded (property) dependencies.
"""

import copy
import fcntl
import functools
import os
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import pulumi
from pulumi.runtime.sync_await import _sync_await

from components.workloads.job_objects import JOB_OBJECTS
from stacks.mocked import (  # noqa: F401 - re-exported: the tests import them from here
    ACCOUNT,
    CAPACITY_BLOCKS,
    PARTITION_PREFIXES,
    PROJECT,
    REGION,
    REPO,
    SCHEDULED_BLOCK,
    STACK_OUTPUTS,
    UNKNOWN,
    ZONE_IDS,
    ZONES,
    RecordingMonitor,
    Registration,
    TrainingMocks,
    evaluate,
    partition_of,
    resolve,
    zones_of,
)
from stacks.yaml_text import load_yaml

#: The Pulumi type of every object a job runs as (components/workloads/job_objects.py): the tests that walk a stack's
#: jobs read it, so they walk a new kind's object too.
JOB_OBJECT_TYPES: tuple[str, ...] = tuple(o.type_token for o in JOB_OBJECTS.values())


def stack_names() -> list[str]:
    """Every stack that has a ``Pulumi.<stack>.yaml`` in the repo."""
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in REPO.glob("Pulumi.*.yaml"))


def stack_config(stack: str) -> dict[str, Any]:
    """The ``config:`` mapping of a stack file (a copy of its own: callers edit it)."""
    return copy.deepcopy(_stack_config(stack))


@functools.cache  # a preset's file, read once per process (the tests read them some 2,000 times)
def _stack_config(stack: str) -> dict[str, Any]:
    data = load_yaml((REPO / f"Pulumi.{stack}.yaml").read_text()) or {}
    return dict(data.get("config") or {})


@dataclass
class Program:
    """What one evaluation of the program registered and exported."""

    stack: str
    preview: bool
    registrations: list[Registration]
    outputs: dict[str, Any]
    """The stack's exports as plain data (:func:`plain`): what ``pulumi stack output --show-secrets`` prints."""
    invokes: list[tuple[str, dict[str, Any]]]
    error: Optional[BaseException] = None
    reads: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, name, id) of existing resources read with ``Resource.get``."""
    secret_outputs: frozenset[str] = frozenset()
    """The exports Pulumi stores encrypted (an Output marked secret, or holding one)."""
    warnings: list[str] = field(default_factory=list)
    """What the program logged as warnings (``pulumi.log.warn``)."""
    output_resources: dict[str, frozenset[str]] = field(default_factory=dict)
    """Export -> the URNs of the resources its value is derived from (``Output.resources``)."""

    def of_type(self, t: str) -> list[Registration]:
        """All registrations of type token ``t``."""
        return [r for r in self.registrations if r.type == t]

    def one(self, t: str, pred: Callable[[Registration], bool] = lambda r: True) -> Registration:
        """The single registration of type ``t`` matching ``pred``."""
        found = [r for r in self.of_type(t) if pred(r)]
        assert len(found) == 1, f"expected one {t}, found {[r.name for r in found]}"
        return found[0]

    def _index(self) -> tuple[dict[str, Registration], dict[str, list[Registration]]]:
        """The registrations by URN and by parent URN, kept while ``registrations`` is the same list of the same
        length (a test that builds a changed program gives it a list of its own: the index follows)."""
        regs = self.registrations
        cached = self.__dict__.get("_index_cache")
        if cached is None or cached[0] is not regs or cached[1] != len(regs):
            urns: dict[str, Registration] = {}
            children: dict[str, list[Registration]] = {}
            for r in regs:
                urns.setdefault(r.urn, r)
                children.setdefault(r.parent, []).append(r)
            cached = (regs, len(regs), urns, children)
            self.__dict__["_index_cache"] = cached
        return cached[2], cached[3]

    def by_urn(self, urn: str) -> Registration:
        """The registration with this URN."""
        return self._index()[0][urn]

    def children(self, parent: Registration) -> list[Registration]:
        """Direct children of ``parent``."""
        return list(self._index()[1].get(parent.urn, []))

    def descendants(self, parent: Registration) -> list[Registration]:
        """All descendants of ``parent``."""
        out: list[Registration] = []
        todo = [parent.urn]
        while todo:
            u = todo.pop()
            for r in self._index()[1].get(u, []):
                out.append(r)
                todo.append(r.urn)
        return out

    def ancestors(self, reg: Registration) -> list[Registration]:
        """Parents of ``reg`` up to the root."""
        out = []
        cur = reg
        while cur.parent and not cur.parent.endswith("pulumi:pulumi:Stack::" + f"{PROJECT}-{self.stack}"):
            try:
                cur = self.by_urn(cur.parent)
            except KeyError:
                break
            out.append(cur)
        return out

    def output_waits_for(self, output: str, target_urn: str) -> bool:
        """True when the export ``output`` resolves only once ``target_urn`` is done: its value is derived from that
        resource, or from one that waits for it (:meth:`waits_for`, a component's children included)."""
        return any(u == target_urn or target_urn in self._upstream(u, True) for u in self.output_resources[output])

    def depends_transitively(self, reg: Registration, target_urn: str) -> bool:
        """True when ``reg`` depends on ``target_urn`` through its provider, resource or property
        dependencies (following dependencies of dependencies, and a component's children)."""
        seen: set[str] = set()
        todo = list(_all_deps(reg))
        while todo:
            u = todo.pop()
            if u == target_urn:
                return True
            if u in seen:
                continue
            seen.add(u)
            try:
                r = self.by_urn(u)
            except KeyError:
                continue
            todo.extend(_all_deps(r))
            todo.extend(c.urn for c in self.children(r))
        return False

    def waits_for(self, reg: Registration, target_urn: str) -> bool:
        """True when ``reg``'s creation waits for ``target_urn``: through its dependencies, its provider (and for a
        component, the providers in its options), a dependency's children when the dependency is a component (the
        SDK expands it into them), or its parent's registration, which waits for the parent's own (the SDK registers
        a child only once its parent is registered)."""
        return target_urn in self._upstream(reg.urn, False)

    def _upstream(self, urn: str, as_dependency: bool) -> frozenset[str]:
        """What ``urn`` waits for: to be registered, or (``as_dependency``) to be done, when a component's children
        count too. Memoized per list of registrations."""
        regs = self.registrations
        cache = self.__dict__.get("_upstream_cache")
        if cache is None or cache[0] is not regs or cache[1] != len(regs):
            cache = (regs, len(regs), {})
            self.__dict__["_upstream_cache"] = cache
        memo: dict[tuple[str, bool], frozenset[str]] = cache[2]
        key = (urn, as_dependency)
        if key in memo:
            return memo[key]
        memo[key] = frozenset()  # a cycle (none in a valid program) ends here
        index, children = self._index()
        r = index.get(urn)
        found: set[str] = set()
        if r is not None:
            for d in [*_all_deps(r), *(u.rsplit("::", 1)[0] for u in getattr(r, "providers", {}).values())]:
                found.add(d)
                found |= self._upstream(d, True)
            if r.parent in index:
                found.add(r.parent)
                found |= self._upstream(r.parent, False)
            if as_dependency and not r.custom and not r.remote:
                for c in children.get(urn, []):
                    found.add(c.urn)
                    found |= self._upstream(c.urn, True)
        memo[key] = frozenset(found)
        return memo[key]


def _all_deps(r: Registration) -> Iterable[str]:
    if r.provider:
        yield r.provider.rsplit("::", 1)[0]
    yield from r.dependencies
    for urns in r.property_dependencies.values():
        yield from urns


_RUNS: dict[tuple[str, bool], Program] = {}


def run_program(
    stack: str,
    *,
    preview: bool = False,
    config: Optional[dict[str, Any]] = None,
    main: Path = REPO / "__main__.py",
    expect_error: bool = False,
    fresh: bool = False,
    project: str = PROJECT,
    project_dir: Path = REPO,
    replaced: Optional[Callable[[str, str], bool]] = None,
) -> Program:
    """Evaluate ``main`` for ``stack`` under mocks. ``config`` replaces the stack file's config; ``project`` is the
    Pulumi project's name; ``project_dir`` the folder the program runs in (that of its Pulumi.yaml, where the
    folders a stack names are: image contexts, code); ``replaced`` (type, name), in a preview, the resources an update
    of the running stack replaces (``stacks.mocked.evaluate``). A stack's own config evaluated by the real program is
    evaluated once per test session (``fresh`` evaluates again)."""
    cached = (
        replaced is None
        and config is None
        and main == REPO / "__main__.py"
        and not expect_error
        and project == PROJECT
        and project_dir == REPO
    )
    if cached and not fresh and (stack, preview) in _RUNS:
        return _RUNS[(stack, preview)]
    if cached and not fresh:
        _RUNS[(stack, preview)] = program = shared(
            f"{stack}-{'preview' if preview else 'up'}",
            lambda: _run_program(stack, preview=preview, config=None, main=main, expect_error=False),
        )
        return program
    return _run_program(
        stack,
        preview=preview,
        config=config,
        main=main,
        expect_error=expect_error,
        project=project,
        project_dir=project_dir,
        replaced=replaced,
    )


#: The environment variable naming a folder the xdist workers of one run share (tests/conftest.py makes it).
SHARED_FOLDER = "EKS_TRAINING_TESTS_SHARED"
#: The environment variable naming a folder of evaluated programs that several pytest runs over the same sources
#: share (.ci/run sets it for its three runs, and removes the folder at its end); unset, each run has its own.
PROGRAMS_FOLDER = "EKS_TRAINING_TESTS_PROGRAMS"


def shared(key: str, evaluate: Callable[[], Program]) -> Program:
    """``evaluate()``'s Program, evaluated once per run however many xdist workers ask for ``key`` (a name for what
    is evaluated: a preset, a variant): the first to ask evaluates it and leaves it in the shared folder as a
    plain-data pickle, the others wait for it and read it (not every worker evaluating every preset: a
    third of the fast tiers' evaluations saved). Outside xdist, evaluated here, unless :data:`PROGRAMS_FOLDER` names a
    folder (the slow tiers then read what the fast tiers evaluated). Only for what the key names in full: a stack's
    config, not a test's environment or files."""
    folder = os.environ.get(PROGRAMS_FOLDER) or os.environ.get(SHARED_FOLDER)
    if not folder:
        return evaluate()
    path = Path(folder) / f"program-{key}.pickle"
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                loaded: Program = pickle.loads(path.read_bytes())
                return loaded
            program = evaluate()
            part = path.with_suffix(".part")
            part.write_bytes(pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL))
            part.replace(path)
            return program
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run_program(
    stack: str,
    *,
    preview: bool,
    config: Optional[dict[str, Any]],
    main: Path,
    expect_error: bool,
    project: str = PROJECT,
    project_dir: Path = REPO,
    replaced: Optional[Callable[[str, str], bool]] = None,
) -> Program:
    cfg = dict(stack_config(stack) if config is None else config)
    # Preflight talks to the AWS account; under mocks it is off unless a test turns it on (and
    # points boto3 at a moto server).
    cfg.setdefault(f"{PROJECT}:preflight", {"enabled": False})
    ev = evaluate(
        stack,
        cfg,
        preview=preview,
        main=main,
        expect_error=expect_error,
        project=project,
        project_dir=project_dir,
        replaced=replaced,
    )
    secret = frozenset(k for k, v in ev.outputs.items() if _sync_await(pulumi.Output.from_input(v).is_secret()))
    outputs = {k: plain(v) for k, v in ev.outputs.items()}
    resources = {k: _resource_urns(v) for k, v in ev.outputs.items()}
    return Program(
        stack, preview, ev.registrations, outputs, ev.invokes, ev.error, ev.reads, secret, ev.warnings, resources
    )


def _resource_urns(value: Any) -> frozenset[str]:
    """The URNs of the resources an exported value is derived from."""
    resources = _sync_await(pulumi.Output.from_input(value).resources())
    return frozenset(_sync_await(r.urn.future()) for r in resources)


def plain(value: Any) -> Any:
    """An exported value as plain data: every Output in it resolved (an unknown one, in a preview, is ``None``, as
    ``Output.future`` gives it), dicts and lists walked."""
    if isinstance(value, pulumi.Output):
        return plain(_sync_await(value.future()))
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a registered value (dicts' values, lists' and tuples' items, recursively)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings_in(v)


def contains_unknown(value: Any) -> bool:
    """True when ``value`` (or anything inside it) is an unknown preview value."""
    if value == UNKNOWN or type(value).__name__ == "Unknown":
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unknown(v) for v in value)
    return False


def guide_example() -> str:
    """The components guide's Python example: every ``python`` block of its "From Python" section, in order."""
    guide = (REPO / "docs" / "how-to" / "components.md").read_text()
    section = guide.split("## From Python", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3, "the guide's example: the cluster, then storage and a job, then a queue and a queued job"
    assert all("from eks_training.components import" in b for b in blocks)
    return "".join(blocks)
