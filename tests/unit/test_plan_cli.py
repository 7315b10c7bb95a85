"""``python -m stacks.plan`` and ``python -m stacks.preflight`` without AWS: no credentials, no region profile, and
every AWS endpoint pointed at a closed port (a call would fail). The plan of every preset prints and exits 0, with
``--json`` equal to the report built by the tests' own path; a bad stack exits 2 with the single root-cause message
``pulumi up`` gives; preflight validates the configuration before any AWS call.

The commands' ``main`` runs in this process for every preset and every bad stack (a fresh Python per run costs 2 s
of imports); ``test_the_commands_as_a_user_runs_them`` runs a case of each outcome as ``python -m ...`` in a
subprocess of its own and shows it prints exactly what the in-process call does."""

import json
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pytest
import yaml

from stacks import mocked
from stacks.mocked import Evaluation
from stacks.plan.report import main as plan_main
from stacks.plan.timeline import first_step
from stacks.preflight.cli import main as preflight_main
from stacks.stackfile import plan_stack
from tests.config_support import stack_report
from tests.harness import REPO, run_program, stack_config, stack_names
from tests.wait import patient

STACKS = stack_names()
MAINS: dict[str, Callable[[Optional[Sequence[str]]], int]] = {
    "stacks.plan": plan_main,
    "stacks.preflight": preflight_main,
}


def offline_env(home: Path) -> dict[str, str]:
    """A user's environment without AWS: no credentials or config files, no instance metadata, every endpoint closed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PULUMI_"))}
    env.update(
        HOME=str(home),
        AWS_CONFIG_FILE=str(home / "no-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "no-credentials"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
    )
    return env


def run(module: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``python -m <module> <args>`` as a user runs it, in the offline environment."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env=offline_env(home),
        capture_output=True,
        text=True,
        timeout=patient(120),
    )


def call(module: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The same command's ``main`` in this process, in the same offline environment (restored afterwards)."""
    saved = dict(os.environ)
    out, err = StringIO(), StringIO()
    try:
        os.environ.clear()
        os.environ.update(offline_env(home))
        with redirect_stdout(out), redirect_stderr(err):
            code = MAINS[module](list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def shared_evaluation(stack: str, stack_file: Optional[Path], config: Any) -> Evaluation:
    """The plan's offline evaluation of a preset, served from the tests' shared one (the same program and
    configuration, with preflight off: ``test_the_plan_evaluates_the_program_as_the_tests_do`` compares them)."""
    assert stack_file is None and config == stack_config(stack), stack
    p = run_program(stack)
    return Evaluation(p.registrations, {}, p.invokes)


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], subprocess.CompletedProcess[str]]:
    """Every preset's plan, as text and as JSON (its program's evaluation shared with the other tests)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mocked, "evaluate_config", shared_evaluation)
        return {
            (s, j): call("stacks.plan", "--stack", s, *(["--json"] if j else []), home=home)
            for s in STACKS
            for j in (False, True)
        }


def test_the_plan_evaluates_the_program_as_the_tests_do() -> None:
    """The plan's own evaluation of a preset (:func:`stacks.mocked.evaluate_config`) registers what the tests' shared
    evaluation does, so the path it models is the one the other tests check."""
    config, plan = plan_stack("workshop")
    mine = mocked.evaluate_config("workshop", None, config).registrations
    theirs = run_program("workshop").registrations

    def graph(regs: Sequence[Any]) -> list[Any]:
        return sorted((r.type, r.name, r.parent, sorted(r.dependencies), sorted(r.providers)) for r in regs)

    assert graph(mine) == graph(theirs)
    assert first_step(plan, mine) == first_step(plan, theirs) is not None


@pytest.mark.parametrize("stack", STACKS)
def test_the_plan_of_every_preset_prints_offline(plans, stack: str) -> None:
    done = plans[(stack, False)]
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for section in (
        "node groups:",
        "storage:",
        "preflight will check, where `pulumi up` runs and in the account",
        "estimated cost: running $",
    ):
        assert section in text, section
    assert text.splitlines()[1] == f"read from {REPO / f'Pulumi.{stack}.yaml'}", text  # which stack file was read
    assert "jobs, by step (the jobs of a step start together, side by side" in text or "jobs: none" in text
    config = yaml.safe_load((REPO / f"Pulumi.{stack}.yaml").read_text())["config"]
    for group in [*(config.get("eks-training:nodeGroups") or {}), "system"]:
        assert f"\n  {group:<12} " in text, group
    for job in config.get("eks-training:jobs") or {}:
        assert f". {job} (" in text, job


@pytest.mark.parametrize("stack", STACKS)
def test_json_is_the_report_the_program_plans(plans, stack: str) -> None:
    """The JSON a script reads is the in-process report of the same stack (which tests/mock/test_plan_report.py compares
    with what the program registers)."""
    done = plans[(stack, True)]
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout)
    assert printed == json.loads(json.dumps(stack_report(stack)))
    assert printed["cost"]["runningPerHour"] >= printed["cost"]["idlePerHour"] > 0


def _stack_file(tmp_path: Path, config: dict[str, Any]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "Pulumi.mine.yaml"
    path.write_text(yaml.safe_dump({"config": {"aws:region": "us-west-2", **config}}))
    return path


GROUPS = {
    "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2},
    "h100": {
        "instanceTypes": ["p5.48xlarge"],
        "minSize": 0,
        "desiredSize": 2,
        "maxSize": 2,
        "availabilityZone": "us-west-2a",
    },
}
TRAIN = {"kind": "pytorch", "script": "/app/train.py", "nodeGroup": "h100", "nodes": 2}

# (id, the stack's eks-training keys, the one problem printed)
BAD = [
    (
        "misspelt instanceTypes in the group a job runs on",
        {
            "nodeGroups": {
                **GROUPS,
                "h100": {
                    **{k: v for k, v in GROUPS["h100"].items() if k != "instanceTypes"},
                    "instanceType": "p5.48xlarge",
                },
            },
            "jobs": {"train": TRAIN},
        },
        "eks-training:nodeGroups.h100.instanceType: unknown key; did you mean instanceTypes (a required key, not set)? "
        "Rename it",
    ),
    (
        "nodes above maxSize",
        {"nodeGroups": GROUPS, "jobs": {"train": {**TRAIN, "nodes": 4}}},
        "eks-training:jobs.train.nodes: 4 > eks-training:nodeGroups.h100.maxSize (2): one pod runs per node; raise "
        "maxSize or lower nodes",
    ),
    (
        "bytes/s written as GB/s",
        {
            "nodeGroups": GROUPS,
            "jobs": {"train": {**TRAIN, "healthCheck": {"enforce": True, "minBusBandwidthGBps": 3.5e11}}},
        },
        "eks-training:jobs.train.healthCheck.minBusBandwidthGBps: 3.5e+11 GB/s is above the 750 GB/s an all-reduce",
    ),
    (
        "an EFA type without a zone",
        {"nodeGroups": {"h100": {k: v for k, v in GROUPS["h100"].items() if k != "availabilityZone"}}},
        "eks-training:nodeGroups.h100.availabilityZone: efa defaults to true for p5.48xlarge, and EFA groups run in "
        "one zone (with a cluster placement group); either set availabilityZone (the zone where its capacity is) to "
        "keep EFA, or set efa: false (or capacityType: SPOT, whose groups default to efa: false)",
    ),
]


@pytest.mark.parametrize("config,message", [pytest.param(c, m, id=i) for i, c, m in BAD])
@pytest.mark.parametrize("module", ["stacks.plan", "stacks.preflight"])
def test_a_bad_stack_exits_2_with_its_root_cause_before_any_aws_call(
    tmp_path: Path, module: str, config: dict[str, Any], message: str
) -> None:
    path = _stack_file(tmp_path, {f"eks-training:{k}": v for k, v in config.items()})
    done = call(module, "--stack", "mine", "--stack-file", str(path), home=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    # a tool that creates nothing does not say that nothing was created (pulumi up's message does)
    assert "invalid stack configuration (1 problem(s)):\n" in done.stderr and "no resource" not in done.stderr
    assert message in done.stderr, done.stderr
    assert done.stdout == "" and "cannot reach" not in done.stderr and "Credentials" not in done.stderr


def test_preflight_of_a_good_stack_does_reach_for_aws(tmp_path: Path) -> None:
    """The control: with a valid stack the same offline preflight gets past validation and fails on the account
    (this machine has no AWS credentials)."""
    path = _stack_file(tmp_path, {"eks-training:nodeGroups": {"cpu": GROUPS["cpu"]}})
    done = call("stacks.preflight", "--stack", "mine", "--stack-file", str(path), home=tmp_path)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr == (
        "error: cannot use the stack's AWS credentials (aws:profile, aws:sharedConfigFiles, "
        "aws:sharedCredentialsFiles, aws:assumeRoles): Unable to locate credentials; give the stack credentials AWS "
        "accepts (`aws configure`, `aws sso login`, or a profile named in the stack file's aws:profile), and check "
        "them with `aws sts get-caller-identity`\n"
    )
    planned = call("stacks.plan", "--stack", "mine", "--stack-file", str(path), home=tmp_path)
    assert planned.returncode == 0 and "region us-west-2" in planned.stdout
    assert "the stack is in us-west-2, where prices differ" in planned.stdout
    assert (
        "note: us-east-1 list prices (instances: On-Demand as published on 2026-07-20, "
        "components/catalog/instances.py; EKS, NAT, EBS, KMS, FSx: components/catalog/prices.py)"
    ) in planned.stdout


def test_an_unreadable_stack_file_exits_2(tmp_path: Path) -> None:
    done = call(
        "stacks.plan", "--stack", "nothing", "--stack-file", str(tmp_path / "Pulumi.nothing.yaml"), home=tmp_path
    )
    assert done.returncode == 2 and "error: cannot read" in done.stderr


def test_the_plan_of_a_jobs_only_stack_shows_what_it_makes_and_nothing_of_the_cluster(tmp_path: Path) -> None:
    """A jobs-only stack registers its jobs, images and pre-pulls on another stack's cluster (__main__.py,
    stacks/jobs_only.py): its plan names that stack and the team, and prints no network, queue, storage, operations,
    account check or hourly cost of a cluster it does not make, nor a path to the first step."""
    example = REPO / "examples" / "teams" / "Pulumi.vision.yaml"
    done = call("stacks.plan", "--stack", "vision", "--stack-file", str(example), home=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    ref = "organization/eks-training/shared"
    assert out.startswith(
        f"plan of jobs-only stack vision (project eks-training, region us-east-1): its jobs run on "
        f"the cluster of {ref}, as team vision;"
    ), out
    assert f"\nread from {example}\n" in out, out  # the file given, not a stack file of the current folder
    for absent in (
        "network:",
        "queues (Kueue)",
        "storage:",
        "operations:",
        "eks-training:network:",
        "vCPU quota",
        "EKS control plane",
        "Kubernetes 1.",
    ):
        assert absent not in out, absent
    assert f"node groups of {ref} the jobs are placed for" in out and "\n  gpu          g5.xlarge:" in out
    assert "  1. train (pytorch) on gpu: 2 node(s)" in out and "  training: built from " in out
    assert f"estimated cost: none per hour of its own (its jobs run on the nodes of {ref}" in out
    assert out.rstrip().endswith(
        f"first training step: not modelled (a jobs-only stack: its jobs start on the cluster of {ref}, whose plan "
        "shows that cluster's path)"
    )
    as_json = call("stacks.plan", "--stack", "vision", "--stack-file", str(example), "--json", home=tmp_path)
    printed = json.loads(as_json.stdout)
    assert (printed["clusterStack"], printed["team"]) == (ref, "vision")
    assert printed["network"] is printed["queues"] is printed["storage"] is printed["operations"] is None
    assert printed["cost"]["runningPerHour"] == printed["cost"]["idlePerHour"] == 0
    assert [g["name"] for g in printed["nodeGroups"]] == ["gpu"]
    # preflight checks only the machine: the AWS CLI its kubeconfig runs (the account is the cluster stack's)
    assert [c["key"] for c in printed["preflight"]["checks"]] == ["PATH"]
    assert "preflight will check, where `pulumi up` runs and in the account:\n  - PATH: the AWS CLI" in out


def test_the_plan_of_a_cluster_with_teams_prints_each_team(tmp_path: Path) -> None:
    """The teams guide's plan of the shared cluster shows each team's namespace, queue, cohort, quota and borrowing."""
    example = REPO / "examples" / "teams" / "Pulumi.shared.yaml"
    done = call("stacks.plan", "--stack", "shared", "--stack-file", str(example), home=tmp_path)
    assert done.returncode == 0, done.stderr
    teams = [line for line in done.stdout.splitlines() if line.startswith("  team ")]
    assert teams == [
        "  team vision: namespace vision, queue vision/vision -> ClusterQueue team-vision in cohort eks-training; "
        "quota 1 system, 1 gpu node(s); may borrow, lends its idle share",
        "  team nlp: namespace team-nlp, queue team-nlp/nlp -> ClusterQueue team-nlp in cohort eks-training; "
        "quota 1 system, 1 gpu node(s); never borrows, lends its idle share",
    ]
