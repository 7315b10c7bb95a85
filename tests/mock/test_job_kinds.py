"""Job kinds are plugins (:mod:`stacks.kinds`): a kind defined here, in the test tree, and registered validates, plans,
registers under mocks, reports and runs locally without any product file naming it; and the registry's facts agree
with what the components and the in-cluster programs know of each Kubernetes resource."""

import ast
import io
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import pulumi
import pytest

from components.admission import FRAMEWORKS
from components.workloads.collector import RESOURCES as COLLECTED
from components.workloads.command import command_env
from components.workloads.indexed import indexed_workers
from components.workloads.job_objects import JOB_OBJECTS
from components.workloads.spec import JobSpec, WorkerPlacement
from stacks.config import load_config
from stacks.config.errors import ConfigError
from stacks.kinds import KINDS, BuildContext, JobComponent, JobKind, LocalContext, LocalProcesses, register, unregister
from stacks.local.runner import LocalRunner
from stacks.outputs import wait_command, wait_seconds
from stacks.plan import build_plan
from stacks.plan.report import render, report
from tests.harness import PROJECT, REPO, resolve, run_program, stack_config
from tests.python_source import parse
from training.kube_api import RESOURCES as IN_CLUSTER

#: The stack the toy kind's job is added to (one CPU group ``cpu``, the toolbox image).
STACK = "workshop"


class SleepJob(pulumi.ComponentResource):
    """A toy component of the test tree: every pod sleeps ``seconds``, with its peers in the environment."""

    job_name: pulumi.Output[str]
    output_dir: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: JobSpec,
        placement: WorkerPlacement,
        nodes: int,
        seconds: str,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("tests:index:SleepJob", name, None, opts)
        self.job_name, self.output_dir = indexed_workers(
            self,
            name,
            spec,
            placement,
            command=["sleep", seconds],
            nodes=nodes,
            max_retries=1,
            app_name="sleep-job",
            port=("peers", 29500),
            environment=lambda hosts: command_env(spec, placement, nodes, hosts),
        )
        self.register_outputs({"job_name": self.job_name, "output_dir": self.output_dir})


class Sleep(JobKind):
    """The toy kind: pods run ``sleep <seconds>`` (``args``: the seconds), nothing else."""

    name = "sleep"
    summary = "every pod sleeps for args[0] seconds"
    fixed_size = "a sleeping job has nothing to resize"
    one_process_per_pod = True

    def problems(self, job: Any) -> list[tuple[str, str]]:
        problems = []
        if job.command is not None:
            problems.append(("command", "a sleep job's command is sleep; give the seconds in args"))
        if len(job.args) != 1 or not job.args[0].isdigit():
            problems.append(("args", "a sleep job takes one argument, the seconds"))
        return problems

    def program_text(self, job: Any) -> str:
        return "sleep"

    def build(self, ctx: BuildContext) -> JobComponent:
        spec = {**ctx.spec, "args": []}
        return SleepJob(ctx.name, spec, ctx.job.placement, ctx.job.nodes, ctx.job.config.args[0], opts=ctx.opts)

    def local_processes(self, ctx: LocalContext) -> LocalProcesses:
        env = command_env(ctx.spec, ctx.placement, ctx.nodes, ctx.peers, port=ctx.machine.free_port())
        return LocalProcesses([["sleep", ctx.job.config.args[0]]] * ctx.nodes, env)


@pytest.fixture
def sleep_kind() -> Iterator[JobKind]:
    kind = register(Sleep())
    try:
        yield kind
    finally:
        unregister(kind.name)


def _config(**job: Any) -> dict[str, Any]:
    cfg = stack_config(STACK)
    cfg[f"{PROJECT}:jobs"] = {"nap": {"kind": "sleep", "nodeGroup": "cpu", "nodes": 2, "args": ["1"], **job}}
    cfg.pop(f"{PROJECT}:datasets", None)
    return cfg


def _plan(cfg: dict[str, Any]) -> Any:
    return build_plan(load_config(PROJECT, STACK, cfg))


def test_an_unregistered_kind_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ConfigError) as err:
        _plan(_config())
    assert f"{PROJECT}:jobs.nap.kind" in str(err.value) and "'sleep' is not a kind of job" in str(err.value)
    assert all(name in str(err.value) for name in KINDS)


def test_a_kind_from_the_test_tree_validates_plans_registers_reports_and_runs(
    sleep_kind: JobKind, tmp_path: Path
) -> None:
    # validates: the kind's own rule, the shared ones (a fixed size) with its reason
    for job, where, what in (
        ({"command": ["x"]}, "jobs.nap.command", "a sleep job's command is sleep"),
        ({"minNodes": 1}, "jobs.nap.minNodes", "(a sleeping job has nothing to resize)"),
        ({"launcherCommand": ["x"]}, "jobs.nap.launcherCommand", "only mpi jobs have a launcher"),
    ):
        with pytest.raises(ConfigError) as err:
            _plan(_config(**job))
        assert f"{PROJECT}:{where}" in str(err.value) and what in str(err.value), job
    # plans
    cfg = _config()
    plan = _plan(cfg)
    nap = plan.jobs["nap"]
    assert (nap.kind, nap.nodes, nap.min_nodes, nap.max_nodes) == ("sleep", 2, 2, 2)
    assert nap.read_only_root_filesystem is True
    # reports
    r = report(plan, "us-east-1")
    assert [(j["name"], j["kind"], j["processesPerPod"]) for j in r["jobs"]] == [("nap", "sleep", 1)]
    assert "nap (sleep) on cpu: 2 node(s) x 1 process (the command" in render(r)
    # registers under mocks, through the real program
    p = run_program(STACK, config=cfg)
    assert p.error is None, p.error
    (component,) = p.of_type("tests:index:SleepJob")
    (job,) = [r for r in p.descendants(component) if r.type == "kubernetes:batch/v1:Job"]
    pod = job.inputs["spec"]["template"]["spec"]
    assert job.inputs["spec"]["completions"] == 2 and job.inputs["spec"]["completionMode"] == "Indexed"
    assert pod["containers"][0]["command"] == ["sleep", "1"]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]  # queued like every job
    assert not p.of_type("eks-training:index:MpiOperator")  # nothing to install for it
    assert not p.of_type("eks-training:index:EtcdRendezvous")
    out = resolve(p.outputs["jobs"])["nap"]
    assert resolve(out["kind"]) == "sleep"
    # ends when it succeeds or fails, or after as long as pulumi up would wait for it
    assert resolve(out["waitCommand"]) == wait_command("training", "nap", wait_seconds(plan.jobs["nap"]))
    assert wait_seconds(plan.jobs["nap"]) == 24 * 3600 + 3600 + 60 + 60  # deadline, queue, grace, failure report
    # runs locally: two real processes sleeping one second each
    runner = LocalRunner(plan=plan, work=tmp_path, repo=REPO, out=io.StringIO(), progress=False)
    pods = runner.pods(nap)
    assert [pod.argv for pod in pods] == [["sleep", "1"], ["sleep", "1"]]
    assert [pod.env["JOB_INDEX"] for pod in pods] == ["0", "1"] and pods[0].env["JOB_SIZE"] == "2"
    output = runner.run_job(nap)
    assert output.is_dir() and "job nap (sleep): started, 2 pod(s) as local processes" in runner.out.getvalue()


def test_the_local_start_line_counts_what_stands_for_the_pods() -> None:
    """Each local process is a pod, but an MPI job's one process is its launcher, whose mpirun starts every rank: the
    start line says so, so a job of 2 nodes does not seem to run on 1."""
    assert KINDS["pytorch"].local_pods_text(2, 2, 1) == "2 pod(s) as local processes"
    assert KINDS["mpi"].local_pods_text(1, 2, 4) == (
        "its launcher pod as a local process, whose mpirun starts 8 rank(s) here"
    )


def test_an_mpi_jobs_local_start_line_counts_the_ranks_mpirun_starts_here(tmp_path: Path) -> None:
    """The ranks of the local run, one per node (the processes the runner places on this machine's CPUs), not the
    GPUs of the group's instance type (g6.48xlarge: 8 a node)."""
    plan = build_plan(load_config(PROJECT, "mpi-horovod", stack_config("mpi-horovod")))
    nccl = plan.jobs["nccl"]
    assert (nccl.nodes, nccl.procs_per_node) == (2, 8)
    runner = LocalRunner(plan=plan, work=tmp_path, repo=REPO, out=io.StringIO(), progress=False)
    assert runner.placement(nccl, 2)["procs_per_node"] == 1
    assert runner.pods_text(nccl, [object()]) == (  # type: ignore[list-item]
        "its launcher pod as a local process, whose mpirun starts 2 rank(s) here"
    )


def test_every_kind_is_known_to_the_components_and_the_in_cluster_programs() -> None:
    """A kind's Kubernetes object is a declared job object (components/workloads/job_objects.py), which the
    collector and Kueue's configuration read; ``training/kube_api.py``, the image's copy that ``wait_for_jobs.py``
    and the collector run, agrees with the declaration: API path, success condition, kubectl's name."""
    for kind in KINDS.values():
        assert JOB_OBJECTS[kind.job_object.kind] is kind.job_object, kind.name
    for obj in JOB_OBJECTS.values():
        assert COLLECTED[obj.resource] == (obj.group, obj.resource), obj.kind
        in_cluster = IN_CLUSTER[obj.resource]
        assert in_cluster.path == f"/apis/{obj.api_version}/namespaces/{{ns}}/{obj.resource}/{{name}}", obj.kind
        assert (in_cluster.success, in_cluster.kind) == (obj.succeeded, obj.kubectl_name), obj.kind
        assert obj.kueue_framework in FRAMEWORKS, obj.kind
    assert set(COLLECTED) == set(IN_CLUSTER) == {o.resource for o in JOB_OBJECTS.values()}
    assert {k.job_object.resource for k in KINDS.values()} <= set(IN_CLUSTER)


def kind_branches(root: Path, package: str, names: Sequence[str]) -> list[str]:
    """Where a module of ``package`` outside ``stacks/kinds`` decides by a job kind's name: a comparison of something
    called ``kind`` (``job.kind``, ``j["kind"]``, ``c.kind``) with a kind's name, or a container (a set, tuple, list or
    dict's keys) of two kinds' names."""
    found = []

    def kindish(node: ast.AST) -> bool:
        text = ast.unparse(node)
        return text == "kind" or text.endswith((".kind", "['kind']", '["kind"]'))

    def named(node: ast.AST) -> bool:
        return isinstance(node, ast.Constant) and node.value in names

    for path in sorted((root / package).rglob("*.py")):
        if "kinds" in path.relative_to(root / package).parts:
            continue
        for node in ast.walk(parse(path.read_text(), str(path))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(kindish(s) for s in sides) and any(
                    named(s) or isinstance(s, (ast.Tuple, ast.Set, ast.List)) and any(named(e) for e in s.elts)
                    for s in sides
                ):
                    found.append(f"{where}: {ast.unparse(node)}")
            elif isinstance(node, (ast.Tuple, ast.Set, ast.List)) and sum(named(e) for e in node.elts) >= 2:
                found.append(f"{where}: {ast.unparse(node)}")
            elif isinstance(node, ast.Dict) and sum(named(k) for k in node.keys if k is not None) >= 2:
                found.append(f"{where}: a lookup by kind")
    return found


def test_nothing_outside_the_kinds_branches_on_a_kind_name() -> None:
    assert kind_branches(REPO, "stacks", list(KINDS)) == []


def test_the_branch_walk_finds_what_the_kinds_replaced(tmp_path: Path) -> None:
    """Control: each form the registry replaced (stacks/workloads.py, stacks/outputs.py, stacks/plan/report.py,
    stacks/config/jobs.py before it) is found."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        'if job.kind == "mpi":\n    pass\n'
        'resource = "mpijob" if kind == "mpi" else "job"\n'
        'size = 1 if j["kind"] in ONE else 2\n'
        'ONE = ("command", "tensorflow")\n'
        'why = {"mpi": "a", "command": "b"}[kind]\n'
        'ok = d["kind"] == "CustomResourceDefinition"\n'
    )
    (tmp_path / "pkg" / "kinds").mkdir()
    (tmp_path / "pkg" / "kinds" / "b.py").write_text('if kind == "mpi":\n    pass\n')
    assert sorted(f.split(":")[1] for f in kind_branches(tmp_path, "pkg", list(KINDS))) == ["1", "3", "5", "6"]


@pytest.mark.parametrize(
    "facts, lacking",
    [
        ({"fixed_size": ""}, "fixed_size"),
        ({"image_package": "jax"}, "example_image"),
        ({"summary": ""}, "summary"),
    ],
)
def test_a_kind_without_the_facts_its_messages_need_is_not_registered(facts: dict, lacking: str) -> None:
    """A kind that is not elastic says why it cannot change size; one that needs a package in its image names a
    shipped folder that has it: the messages to users are built from these, and read badly without them."""
    kind = type("Partial", (Sleep,), {"name": "partial", **facts})()
    with pytest.raises(ValueError, match=rf"job kind 'partial' lacks {lacking}"):
        register(kind)
    assert "partial" not in KINDS
