"""``python -m stacks.rehearse`` offline: a bad stack file exits 2 with the message ``python -m stacks.plan`` prints,
before any box is built or brought up; the stack's commands are rewritten to run against the box. The rehearsal
itself runs in the cluster tier (``tests/cluster/test_box_rehearse.py``:
``test_the_rehearse_command_prints_the_run``)."""

import re
import shlex
import subprocess
import time
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest

from stacks.box import build as box_build
from stacks.box import cluster
from stacks.box import rehearse_cli as rehearse
from stacks.outputs import wait_command
from tests.unit.test_plan_cli import BAD, _stack_file


@pytest.mark.parametrize("config,message", [pytest.param(c, m, id=i) for i, c, m in BAD[:2]])
def test_a_bad_stack_file_exits_2_before_any_box(tmp_path: Path, monkeypatch, config, message) -> None:
    def no_box(*args, **kwargs):
        raise AssertionError("a box was built or brought up for a bad stack file")

    monkeypatch.setattr(box_build, "build", no_box)
    monkeypatch.setattr(cluster.Box, "up", no_box)
    path = _stack_file(tmp_path / "project", {f"eks-training:{k}": v for k, v in config.items()})
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = rehearse.main(["--stack", "mine", "--stack-file", str(path), "--workdir", str(tmp_path / "boxes")])
    assert code == 2, (out.getvalue(), err.getvalue())
    assert "invalid stack configuration (1 problem(s)):\n" in err.getvalue()
    assert message in err.getvalue()
    assert out.getvalue() == ""
    assert not (tmp_path / "boxes").exists()


def test_an_unreadable_stack_file_exits_2(tmp_path: Path) -> None:
    err = StringIO()
    with redirect_stderr(err):
        code = rehearse.main(
            [
                "--stack",
                "nothing",
                "--stack-file",
                str(tmp_path / "Pulumi.nothing.yaml"),
                "--workdir",
                str(tmp_path / "boxes"),
            ]
        )
    assert code == 2 and "error: cannot read" in err.getvalue()


def test_the_stacks_commands_run_the_boxs_kubectl(tmp_path: Path) -> None:
    """Every kubectl of a waitCommand (Kueue's Workload, the wait, the command substitutions that name the Workload
    and read how it finished) and of a logsCommand runs the box's kubectl with its kubeconfig; nothing else in the line
    changes (the jsonpath's quoting included)."""
    kubectl, kubeconfig = Path("/cache/box dir/kubectl"), tmp_path / "kubeconfig"
    wait = wait_command("training", "train", 90060)
    logs = "kubectl logs -n training -f --tail=-1 --prefix --max-log-requests 64 -l eks-training/job=train"
    own = f"{shlex.quote(str(kubectl))} --kubeconfig {shlex.quote(str(kubeconfig))}"
    for command in (wait, logs):
        rewritten = rehearse.box_command(command, kubectl, kubeconfig)
        assert "kubectl " not in rewritten.replace(own, ""), rewritten  # none left
        assert rewritten.count(own) == command.count("kubectl ") and rewritten.replace(own, "kubectl") == command
        # and bash runs it: the box's kubectl is what it calls
        done = subprocess.run(["bash", "-c", rewritten.split(";")[0]], capture_output=True, text=True)
        assert "/cache/box dir/kubectl: No such file or directory" in done.stderr, done.stderr
    assert wait.count("kubectl ") == 5  # the conditions twice, the wait, the Workload's name and its Finished reason


def test_an_exit_code_for_no_job_is_refused_before_any_box(tmp_path, capsys) -> None:
    """``--exit-code`` naming no job of the stack (a typo) exits 2 listing its jobs, before any box."""
    assert rehearse.main(["--stack", "dev", "--workdir", str(tmp_path), "--exit-code", "trian=2"]) == 2
    err = capsys.readouterr().err
    assert (
        "error: --exit-code names no job of stack dev: trian (its jobs: eks-training-dev-stage-cifar10, evaluate, "
        "train, train-allreduce)" in err
    ), err
    assert not (tmp_path / "rehearse-dev").exists()


def test_a_malformed_exit_code_is_a_usage_error(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        rehearse.main(["--stack", "dev", "--workdir", str(tmp_path), "--exit-code", "train=0"])
    assert exc.value.code == 2
    assert "--exit-code train=0: expected JOB=CODE[:CONTAINER] with CODE 1-255" in capsys.readouterr().err


class _FakeBox:
    """A box whose pods and Workloads are what the test sets (``pods``, ``workloads``), as kubectl returns them."""

    def __init__(self) -> None:
        self.pods: list[dict] = []
        self.workloads: list[dict] = []
        #: Kueue's Workload CRD is Established (stacks.box.cluster.crd_established reads it from here).
        self.established_crds = {"workloads.kueue.x-k8s.io"}

    def get(self, *args: str) -> dict:
        assert args in (("pods", "-A"), ("workloads.kueue.x-k8s.io", "-A")), args
        return {"items": self.pods if args[0] == "pods" else self.workloads}


def _pod(name: str, job: str, phase: str, node: str = "", conditions=(), annotations=None, exit_code=None) -> dict:
    status: dict = {"phase": phase, "conditions": list(conditions)}
    if exit_code is not None:
        status["containerStatuses"] = [{"name": "worker", "state": {"terminated": {"exitCode": exit_code}}}]
    return {
        "metadata": {
            "name": name,
            "namespace": "training",
            "uid": name,
            "labels": {"job-name": job, "batch.kubernetes.io/job-name": job},  # as the Job controller sets both
            "annotations": annotations or {},
        },
        "spec": {"nodeName": node} if node else {},
        "status": status,
    }


def _workload(job: str, *conditions: dict) -> dict:
    return {
        "metadata": {"name": f"job-{job}", "ownerReferences": [{"kind": "Job", "name": job}]},
        "status": {"conditions": list(conditions)},
    }


def test_the_timeline_names_every_wait_and_every_outcome() -> None:
    """The report of a run seen in four looks: a job queued by Kueue (its reason), then admitted; a pod Pending with
    the scheduler's reason, then running on its node, then failed with its exit code; a pod held by its
    wait-for-jobs init container; a pod failed by a disruption (the pod GC of a lost node); a pod gone while running;
    a pod only the rehearsal's own loop saw."""
    from stacks.box.rehearse import HELD, Event
    from stacks.box.timeline import Recorder, report

    box = _FakeBox()
    rec = Recorder(box, start=time.monotonic())  # type: ignore[arg-type]
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
    }
    quota = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu",
    }
    box.workloads = [_workload("train", quota)]
    box.pods = [
        _pod("train-0-a", "train", "Pending", conditions=[unschedulable]),
        _pod("evaluate-0-b", "evaluate", "Pending", node="system-0", annotations={HELD: "jobs/train"}),
        _pod("lost-0-c", "lost", "Running", node="gpu-1"),
    ]
    rec.poll()
    box.workloads = [_workload("train", {**quota, "status": "True"}, {"type": "Admitted", "status": "True"})]
    box.pods[0] = _pod("train-0-a", "train", "Running", node="gpu-0")
    rec.poll()
    box.pods = [
        _pod("train-0-a", "train", "Failed", node="gpu-0", exit_code=69),
        _pod(
            "lost-0-c",
            "lost",
            "Failed",
            node="gpu-1",
            exit_code=0,
            conditions=[
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "DeletionByPodGC",
                    "message": "PodGC: node no longer exists",
                }
            ],
        ),
        _pod("gone-0-d", "gone", "Running", node="gpu-2"),
    ]
    rec.poll()
    box.pods = box.pods[:2]
    rec.poll()

    class _Rehearsal:
        events = [Event(0.0, "applied training")]
        jobs = {"train": {"kind": "Job", "started": 1.0, "finished": 3.5, "outcome": "Complete"}}
        # a pod the rehearsal's own loop saw start, which came and went between two of the recorder's looks
        pods = {"quick-0-e": _pod("quick-0-e", "quick", "Running", node="gpu-3")}

    text = report(_Rehearsal(), rec)  # type: ignore[arg-type]
    waited = text.split("\nWhat waited, and why:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(waited) == 3, waited
    assert any(
        re.fullmatch(
            r"  pod training/train-0-a \(Job train\) [\d.]+-[\d.]+ s: not scheduled: 0/2 nodes are "
            r"available: 2 Insufficient nvidia.com/gpu\.",
            w,
        )
        for w in waited
    ), waited
    assert any("its wait-for-jobs init container waits for jobs/train" in w for w in waited), waited
    assert any(
        w.startswith("  job train ")
        and "queued, not admitted: QuotaReserved=False (Pending: couldn't assign "
        "flavors to pod set main: insufficient quota for nvidia.com/gpu)"
        in w
        for w in waited
    ), waited
    ran = text.split("\nWhere each pod ran:\n", 1)[1].split("\n\n", 1)[0]
    assert "training/train-0-a (Job train) on gpu-0: started " in ran and "Failed (exit 69 in worker)" in ran, ran
    assert "training/lost-0-c (Job lost) on gpu-1: started " in ran
    assert "Failed (DisruptionTarget: DeletionByPodGC: PodGC: node no longer exists)" in ran, ran
    assert "training/gone-0-d (Job gone) on gpu-2: started " in ran and "deleted while Running" in ran, ran
    assert "training/quick-0-e (Job quick) on gpu-3: started -, seen running by the rehearsal only" in ran, ran
    timeline = text.split("\nWhere each pod ran:\n", 1)[0]
    assert "Job train: admitted" in timeline and "applied training" in timeline
    assert text.endswith("Jobs:\n  train (Job): Complete, started 1.0 s, finished 3.5 s, took 2.5 s")


def test_the_timeline_reads_kueues_workload_crd_until_established_then_never_again() -> None:
    """Each read of a CRD returns its whole schema (Kueue's Workload: 700 KB, decoded by the apiserver and here): the
    recorder reads the Workload CRD until it is Established, then lists the Workloads without it."""
    from stacks.box.timeline import Recorder

    class CountingBox(_FakeBox):
        def __init__(self) -> None:
            super().__init__()
            self.established_crds = set()
            self.crd_reads = 0
            self.established = False

        def get(self, *args: str) -> dict:
            if args[0] != "crd":
                return super().get(*args)
            self.crd_reads += 1
            return {"status": {"conditions": [{"type": "Established", "status": str(self.established)}]}}

    box = CountingBox()
    rec = Recorder(box, start=time.monotonic())  # type: ignore[arg-type]
    rec.poll()
    rec.poll()
    assert box.crd_reads == 2 and not rec.workloads  # not Established yet: no Workload listed
    box.established = True
    box.workloads = [_workload("train")]
    for _ in range(5):
        rec.poll()
    assert box.crd_reads == 3, box.crd_reads
    assert "train" in rec.workloads


def test_a_jobs_only_stack_is_refused_before_any_box(tmp_path: Path, monkeypatch) -> None:
    """A jobs-only stack's jobs run on another stack's cluster, which the box does not have: exit 2 naming that stack
    and what to run instead, not the mocks' own message about a stack reference."""

    def no_box(*args, **kwargs):
        raise AssertionError("a box was built or brought up for a jobs-only stack")

    monkeypatch.setattr(box_build, "build", no_box)
    monkeypatch.setattr(cluster.Box, "up", no_box)
    config = {
        "eks-training:cluster": {"stackReference": "organization/eks-training/shared", "team": "vision"},
        "eks-training:nodeGroups": {
            "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 2}
        },
        "eks-training:jobs": {"train": {"kind": "command", "nodeGroup": "cpu", "command": ["python", "-c", "0"]}},
    }
    path = _stack_file(tmp_path / "project", config)
    err = StringIO()
    with redirect_stderr(err):
        code = rehearse.main(["--stack", "mine", "--stack-file", str(path), "--workdir", str(tmp_path / "boxes")])
    assert code == 2, err.getvalue()
    assert err.getvalue().startswith(
        "error: stack mine is jobs-only (cluster.stackReference: organization/eks-training/shared): its jobs run on "
        "the queues of another stack's cluster"
    ), err.getvalue()
    assert "python -m stacks plan" in err.getvalue() and not (tmp_path / "boxes").exists()


def test_a_pods_owner_is_named_by_its_job_object() -> None:
    """An MPI launcher's pod (a batch Job's too) is its MPIJob's; a Deployment's pod is named by its Deployment."""
    from stacks.box.podlogs import pod_owner

    launcher = {
        "metadata": {
            "labels": {
                "batch.kubernetes.io/job-name": "train-launcher",
                "training.kubeflow.org/job-name": "train",
                "training.kubeflow.org/job-role": "launcher",
            }
        }
    }
    assert pod_owner(launcher) == ("MPIJob train (launcher)", "train")
    assert pod_owner(_pod("stage-0", "stage", "Running")) == ("Job stage", "stage")
    etcd = {
        "metadata": {
            "labels": {"pod-template-hash": "5d9f"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "etcd-5d9f"}],
        }
    }
    assert pod_owner(etcd) == ("Deployment etcd", None)
    assert pod_owner({"metadata": {}}) == ("no owner", None)


FAKE_KUBECTL = """#!/bin/sh
# a kubectl that answers as the cluster in $STATE would: the Workloads' names, the wait, the Finished reason
shift 2  # --kubeconfig FILE
echo "$*" >> "$CALLS"
case "$*" in
  *--sort-by=.metadata.creationTimestamp*) printf '%s' "$WORKLOADS" ;;
  wait*) echo "workload.kueue.x-k8s.io/${WORKLOADS##* } condition met" ;;
  *'"Finished"'*) printf '%s' "$REASON" ;;
esac
"""


@pytest.mark.parametrize(
    ("workloads", "reason", "code"),
    [("job-train-a1", "Succeeded", 0), ("job-train-a1", "Failed", 1), ("job-train-old job-train-new", "Succeeded", 0)],
)
def test_the_wait_command_ends_with_the_newest_workloads_outcome(
    tmp_path: Path, workloads: str, reason: str, code: int
) -> None:
    """The waitCommand, run by sh against a kubectl that answers as Kueue would: it waits on the newest of the job's
    Workloads (a replaced job's old one may still be there), exits 1 unless that one Finished as Succeeded, and leaves
    no variable in the shell that evals it."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    line = rehearse.box_command(wait_command("training", "train", 3600), kubectl, tmp_path / "kubeconfig")
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(tmp_path / "calls"), "WORKLOADS": workloads, "REASON": reason}
    done = subprocess.run(
        ["sh", "-c", 'eval "$1"; s=$?; echo "w=${w-unset}"; exit $s', "sh", line],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stdout.endswith("w=unset\n"), done.stdout
    calls = (tmp_path / "calls").read_text().splitlines()
    newest = workloads.split()[-1]
    assert f"wait -n training --for=condition=Finished --timeout=3600s workloads.kueue.x-k8s.io/{newest}" in calls
    assert any(c.startswith(f"get workloads.kueue.x-k8s.io -n training {newest} -o jsonpath=") for c in calls), calls


def test_the_wait_command_says_when_the_job_has_no_workload_yet(tmp_path: Path) -> None:
    """No Workload owned by the job (not created yet, or Kueue has not queued it): exit 1 with that, no wait."""
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    line = rehearse.box_command(wait_command("training", "train", 3600), kubectl, tmp_path / "kubeconfig")
    env = {"PATH": "/usr/bin:/bin", "CALLS": str(tmp_path / "calls"), "WORKLOADS": "", "REASON": ""}
    done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env)
    assert done.returncode == 1
    assert done.stderr == "train: no Kueue Workload yet: the job is not created, or Kueue has not queued it\n"
    assert not any(c.startswith("wait") for c in (tmp_path / "calls").read_text().splitlines())
