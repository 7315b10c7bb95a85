"""Shared fixtures, the test tiers, and the tests that run alone.

Every test belongs to exactly one tier, the folder its module is in, which sets its marker: ``tests/unit`` (pure
functions), ``tests/mock`` (the program evaluated under Pulumi mocks), ``tests/moto`` (boto3 code against a real moto
server), ``tests/real`` (real processes: torchrun, etcd, ...) or ``tests/cluster`` (every stack's objects on the
cluster in a box, :mod:`stacks.box`). What the tiers share (harness, support modules, programs, snapshots) is in
``tests/`` itself. ``pytest`` alone runs the fast tiers
(``unit`` and ``mock``); ``.ci/run`` runs all of them.

The tiers run on every core (pytest-xdist). A test marked ``alone`` asserts a timing bound that another test's
processes on the same cores would stretch (resuming within 15 s of a lost node): while it runs (its setup, call
and teardown), no other test runs on any worker. The workers agree through two ``flock``
locks in a folder the controller makes: every test holds the "room" shared, a test marked ``alone`` holds it
exclusively; a "gate" taken before the room keeps new tests out while an ``alone`` test waits for the room
to empty (else the other workers' back-to-back tests could keep it waiting to the end).

What keeps the fast tiers fast (their time: docs/contributing/testing.md), none of which changes what a test checks:

- a tier's folder that ``-m`` cannot select is not collected at all (its modules, and their imports, torch among them,
  are not even imported): :func:`pytest_ignore_collect`;
- once the tests are collected, every object alive is frozen out of the garbage collector's reach and its thresholds
  are raised: the Pulumi SDK, pulumi_aws's thousands of types and the programs a worker keeps make each full
  collection long, and a mock evaluation allocates enough to trigger many (measured: 40 % of an evaluation's time);
- each preset (and each variant of tests/variants.py) is evaluated once per run, by the first worker that needs it;
  the other worker reads the Program it left in the folder of the locks (plain data: :func:`tests.harness.shared`),
  not both evaluating every preset (a third of the tier's evaluations);
- an xdist worker that has sent its last report freezes its objects too, so the full garbage collections pytest
  runs at its end (to report unraisable exceptions) do not walk the gigabyte of programs it kept: 2 s per run.
"""

import fcntl
import gc
import itertools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import orphans
from tests.day import TEST_DAY

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TIERS = ("unit", "mock", "moto", "real", "cluster")
TESTS = Path(__file__).resolve().parent


def tier_of(path: Path) -> str | None:
    """The tier of a test module: the folder of ``tests/`` it is in (``None`` outside a tier's folder)."""
    try:
        parts = path.resolve().relative_to(TESTS).parts
    except ValueError:  # a test file given from elsewhere: no tier, refused below
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_itemcollected(item: pytest.Item) -> None:
    """The tier's marker, from the module's folder (before ``-m`` selects)."""
    tier = tier_of(item.path)
    if tier is not None:
        item.add_marker(tier)


#: The folder of the locks, passed from the xdist controller to its workers (``workerinput``).
LOCKS_KEY = "eks_training_locks"
_locks = pytest.StashKey[str]()
#: The units' durations in earlier runs (:func:`durations_file`), passed from the controller to its workers.
DURATIONS_KEY = "eks_training_durations"
_durations = pytest.StashKey[dict[str, float]]()
#: The temporary folder of every process the run starts (``TMPDIR``), removed at its end.
_temp = pytest.StashKey[str]()
#: Its name's start: short, as OpenMPI and PMIx put their Unix sockets under ``TMPDIR`` (108 bytes a path).
TEMP_PREFIX = "eks-tmp-"


def temp_of_the_run() -> str:
    """(The controller) a folder for what the processes the tests start leave in ``TMPDIR`` (torchrun's
    ``torchelastic_*`` logs, multiprocessing's ``pymp-*``, TensorFlow's autograph files, a killed process's files):
    every process started after this, the xdist workers among them, inherits it, and the run removes it at its end,
    so a run leaves nothing in the machine's ``/tmp``. pytest's own ``tmp_path`` folders stay where they were (the
    controller read the temporary folder before; the workers' come from it), kept for a failure's reading."""
    folder = tempfile.mkdtemp(prefix=TEMP_PREFIX)
    os.environ["TMPDIR"] = folder
    return folder


def durations_file() -> Path:
    """Where the runs on this machine keep each unit's duration (seconds, setup and teardown included) per ``-m``
    expression: the order in which xdist hands out the units, longest first (:class:`ModuleOrder`). Beside the box's
    binaries and the virtualenvs, outside any clone."""
    root = os.environ.get("EKS_TRAINING_CACHE") or str(Path.home() / ".cache" / "eks-training")
    return Path(root) / "test-durations.json"


def read_durations(markexpr: str | None = None) -> Any:
    """The units' durations of earlier runs of ``-m markexpr`` (every expression's when None; nothing on a fresh
    machine, or when the file is unreadable)."""
    try:
        data = json.loads(durations_file().read_text())
        if markexpr is None:
            return {str(m): dict(units) for m, units in data.items()}
        return {str(k): float(v) for k, v in (data.get(markexpr) or {}).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


#: The runtime of the Go programs the tests start (the box's control plane and etcd, kwok, Kueue, the MPI Operator,
#: kubectl, the real tier's etcd; https://pkg.go.dev/runtime#hdr-Environment_Variables): garbage collection at 400 %
#: heap growth instead of 100 %, with a soft memory limit of 1 GiB, and one processor each (``GOMAXPROCS``), so a
#: server's idle processors do not spin looking for work on cores four tests share. Each setting cut their CPU
#: (docs/contributing/testing.md); what they serve is the same. A value already in the environment is kept.
GO_RUNTIME = {"GOGC": "400", "GOMEMLIMIT": "1GiB", "GOMAXPROCS": "1"}


def sigint_at_its_default() -> None:
    """Give the processes the tests start SIGINT at its default action, as a terminal's foreground command has it
    (Ctrl-C raises KeyboardInterrupt in Python). A run started in the background of a script (``bash -c 'cmd &'``, a
    CI runner's step) inherits SIGINT ignored, and an ignored signal stays ignored through exec: a test's Ctrl-C to a
    command would then do nothing. A handler is reset to the default by exec. Main thread only."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def without_kubernetes_provider_settings() -> None:
    """Drop the ``PULUMI_K8S_*`` variables of the environment the run inherited: pulumi-kubernetes' SDK copies them
    into every provider the program makes without the setting (``PULUMI_K8S_DELETE_UNREACHABLE`` among them), so
    the registrations the tests compare would follow the shell. A test that needs one sets it itself."""
    for name in [n for n in os.environ if n.startswith("PULUMI_K8S_")]:
        del os.environ[name]


def pytest_configure(config: pytest.Config) -> None:
    """The controller (not a worker) makes the folder of the locks and the run's temporary folder
    (:func:`temp_of_the_run`), and reads the units' durations of earlier runs;
    the order of the units is set on every process from the controller's reading (xdist's workers must collect the
    same order). The Go programs' runtime settings and SIGINT's default are set for every process the tests start,
    and the Kubernetes provider's environment settings dropped."""
    for name, value in GO_RUNTIME.items():
        os.environ.setdefault(name, value)
    sigint_at_its_default()
    without_kubernetes_provider_settings()
    if not hasattr(config, "workerinput"):
        left = orphans.stop_orphans()  # a killed run's servers would share the cores with this one
        if left:
            sys.stderr.write(f"[tests] stopped {len(left)} processes a killed test run left: " + "; ".join(left) + "\n")
        os.environ[orphans.RUN_ENV] = orphans.this_run()  # every process this run starts inherits it
        config.stash[_locks] = tempfile.mkdtemp(prefix="eks-training-tests-")
        config.stash[_temp] = temp_of_the_run()
        markexpr = config.getoption("markexpr", "") or ""
        config.stash[_durations] = durations = read_durations(markexpr)
        # a run of the whole of its tiers only (not of some modules, nor with -k): its units' whole durations
        if config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.getoption("keyword", ""):
            config.pluginmanager.register(UnitDurations(markexpr), "eks-training-unit-durations")
    else:  # the workers share the presets' evaluations there too (tests.harness.run_program)
        from tests.harness import SHARED_FOLDER  # a worker's import: the controller starts its workers sooner without

        os.environ[SHARED_FOLDER] = config.workerinput[LOCKS_KEY]
        durations = json.loads(config.workerinput[DURATIONS_KEY])
    config.pluginmanager.register(ModuleOrder(durations), "eks-training-module-order")


class UnitDurations:
    """(The controller, or a run without xdist) each test's setup, call and teardown add to its unit's duration; at
    the end of a session that ran through, the units' durations are kept for the next run of the same ``-m``
    expression (the file's other expressions left as they were)."""

    def __init__(self, markexpr: str) -> None:
        self.markexpr = markexpr
        self.measured: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unit = unit_of_nodeid(report.nodeid)
        self.measured[unit] = self.measured.get(unit, 0.0) + report.duration

    def pytest_sessionfinish(self, exitstatus: int) -> None:
        if not self.measured or exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        merged = {**read_durations(), self.markexpr: {unit: round(s, 1) for unit, s in sorted(self.measured.items())}}
        path = durations_file()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
            tmp.replace(path)
        except OSError:
            pass  # a read-only home: the next run orders by the tests' count


#: A name in a ``-m`` expression.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def tier_selectable(markexpr: str, tier: str) -> bool:
    """Whether ``-m markexpr`` can select any test of ``tier``'s folder: its tests carry that tier's marker, no other
    tier's, and any other markers at all, so the expression is tried with every other name it mentions true or false.
    An expression pytest's marker grammar would parse with arguments (``name(key=value)``) is always selectable."""
    from _pytest.mark.expression import Expression  # pytest's own parser of -m (pinned in requirements-dev.txt)

    if re.search(r"\b(?!(?:and|or|not)\b)[A-Za-z_]\w*\s*\(", markexpr):
        return True
    names = sorted({n for n in _NAME.findall(markexpr) if n not in {"and", "or", "not", *TIERS}})
    expression = Expression.compile(markexpr)
    for values in itertools.product((False, True), repeat=len(names)):
        present = {tier} | {n for n, v in zip(names, values) if v}
        if expression.evaluate(lambda name, **_: name in present):
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A tier's folder is not collected when ``-m`` cannot select its tests (``pytest`` alone, the fast tiers, imports
    no moto, real or cluster module). A test there marked with a second tier is still refused, by the run of its own
    tier (.ci/run runs every tier)."""
    markexpr = config.getoption("markexpr", "")
    tier = collection_path.name if collection_path.parent == TESTS and collection_path.name in TIERS else None
    if not markexpr or tier is None or not collection_path.is_dir():
        return None
    return None if tier_selectable(markexpr, tier) else True


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Every object alive after collection (modules, the SDKs' types) leaves the garbage collector's generations
    for good (https://docs.python.org/3/library/gc.html#gc.freeze), and a collection runs only after 20,000
    allocations (700 by default), a full one more rarely: see the module's docstring."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)


def unit_of_nodeid(nodeid: str) -> str:
    """The unit xdist's loadscope hands to one worker: a test's class, else its module."""
    return nodeid.split("[", 1)[0].rsplit("::", 1)[0]


class ModuleOrder:
    """The order in which xdist hands out the units, modules or classes (``--no-loadscope-reorder`` in
    pyproject.toml: the collected order): a unit with an ``alone`` test first, so that test starts while the other
    workers begin their first tests instead of waiting for a long one to end; then the longest first, by the
    durations earlier runs on this machine recorded (``durations``: unit -> seconds; the longest last would leave the
    other workers idle at the end), then the units with the most selected tests (as xdist's own order would have
    them; a rough proxy for the longest, all a fresh machine has). Each unit's tests keep their order."""

    def __init__(self, durations: dict[str, float] | None = None) -> None:
        self.durations = durations or {}

    @pytest.hookimpl(trylast=True)  # after -m and -k have deselected
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        units: dict[str, list[pytest.Item]] = {}
        for item in items:
            units.setdefault(unit_of_nodeid(item.nodeid), []).append(item)

        def rank(unit: tuple[str, list[pytest.Item]]) -> tuple[bool, float, int]:
            name, tests = unit
            return (not any(i.get_closest_marker("alone") for i in tests), -self.durations.get(name, 0.0), -len(tests))

        items[:] = [item for _, tests in sorted(units.items(), key=rank) for item in tests]


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the folder of the locks and the run's temporary folder. A worker freezes what it holds
    before pytest's unraisable-exception plugin runs its full garbage collections (``_pytest.unraisableexception``, at
    unconfigure and at cleanup): the worker sent its last report at the session's end (xdist ``workerfinished``), so
    nothing those collections would find reaches the run's report anyway."""
    if hasattr(config, "workerinput"):
        gc.freeze()
    for key in (_locks, _temp):
        folder = config.stash.get(key, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """(xdist, on the controller) every worker learns the folder of the locks and the units' earlier durations."""
    node.workerinput[LOCKS_KEY] = node.config.stash[_locks]
    node.workerinput[DURATIONS_KEY] = json.dumps(node.config.stash[_durations])


@contextmanager
def _room(folder: Path, alone: bool) -> Iterator[None]:
    """Hold the room shared, or exclusively when ``alone`` (see the module's docstring)."""
    with open(folder / "gate", "a") as gate, open(folder / "room", "a") as room:
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Run each test (setup, call, teardown) inside the room, on an xdist worker; one process runs one test at a
    time anyway."""
    folder = getattr(item.config, "workerinput", {}).get(LOCKS_KEY)
    if folder is None:
        return (yield)
    with _room(Path(folder), alone=item.get_closest_marker("alone") is not None):
        return (yield)


@pytest.hookimpl(tryfirst=True)  # before -m deselects: an untiered test must fail the run, not vanish from it
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test outside a tier's folder, or marked with another tier than its folder's, is an error (it would silently
    never run, or run twice)."""
    wrong = [item.nodeid for item in items if sum(1 for t in TIERS if item.get_closest_marker(t)) != 1]
    if wrong:
        raise pytest.UsageError(
            f"tests outside tests/<tier>/ or marked with a second tier ({', '.join(TIERS)}): {wrong[:5]}"
        )


@pytest.fixture(scope="session", autouse=True)
def _test_day() -> Iterator[None]:
    """Every test runs on :data:`tests.day.TEST_DAY`."""
    from stacks.config import cluster  # imported here, not at the top: see program_for

    calendar = cluster.today
    cluster.today = lambda: TEST_DAY
    yield
    cluster.today = calendar


@pytest.fixture(scope="session")
def program_for():
    """``program_for(stack, preview)`` evaluates the real program once per stack and mode."""
    # imported here, not at the top: the xdist controller, which runs no test, starts its workers 2 s sooner
    # without the Pulumi SDK and the program's packages
    from tests.harness import Program, run_program

    def get(stack: str, preview: bool) -> Program:
        return run_program(stack, preview=preview)

    return get
