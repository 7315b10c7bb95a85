"""The rehearse command (python -m stacks rehearse) as a user runs it: the report, a failed pod's log, what waits."""

from __future__ import annotations

import json
import re
import subprocess

from stacks.box.cluster import Box
from stacks.box.rehearse_cli import box_command
from stacks.mocked import resolve
from tests.cluster.support import _follow, _processes_under
from tests.harness import REPO, run_program, stack_config
from tests.wait import patient


def test_the_rehearse_command_prints_the_run(binaries, tmp_path, capsys) -> None:
    """``python -m stacks.rehearse --stack dev --keep``'s main, in this process: exit 0; the timeline says what ran
    where (every pod of every job on its group's node), what waited and why (the evaluation's pod held by its
    wait-for-jobs init container until the training job completed), each job's outcome and duration; the stack's
    waitCommand, rewritten, works against the kept box; ``python -m stacks.box down`` then stops the operators the
    rehearsal left running (by pid, waited for) and deletes the box."""
    from stacks.box import cli as box_cli
    from stacks.box import rehearse_cli as rehearse
    from stacks.box.operators import FILE, _runs

    code = rehearse.main(["--stack", "dev", "--keep", "--workdir", str(tmp_path), "--timeout", "120"])
    out = capsys.readouterr().out
    home = tmp_path / "rehearse-dev"
    try:
        assert code == 0, out
        assert out.startswith("Rehearsal of stack dev on 2 simulated nodes (system: 1, cpu: 1)\n"), out
        assert "Every job completed (4)." in out
        jobs = out.split("\nJobs:\n", 1)[1]
        for job in ("eks-training-dev-stage-cifar10", "train-allreduce", "train", "evaluate"):
            assert re.search(
                rf"^  {job} \(Job\): Complete, started [\d.]+ s, finished [\d.]+ s, took [\d.]+ s$", jobs, re.M
            ), jobs
        ran = out.split("\nWhere each pod ran:\n", 1)[1].split("\n\n", 1)[0]
        assert re.search(r"^  training/train-0-\w+ \(Job train\) on cpu-0: started [\d.]+ s, Succeeded", ran, re.M), ran
        assert re.search(
            r"^  training/evaluate-0-\w+ \(Job evaluate\) on system-0: started [\d.]+ s, Succeeded", ran, re.M
        ), ran
        waited = out.split("\nWhat waited, and why:\n", 1)[1]
        assert re.search(
            r"^  pod training/evaluate-0-\w+ \(Job evaluate\) [\d.]+-[\d.]+ s: on system-0, its "
            r"wait-for-jobs init container waits for jobs/train$",
            waited,
            re.M,
        ), waited
        timeline = out.split("\nWhere each pod ran:\n", 1)[0]
        assert re.search(r"^ +[\d.]+ s  Job train: admitted$", timeline, re.M), timeline
        assert re.search(r"^ +[\d.]+ s  Job train: Complete$", timeline, re.M), timeline
        # the stack's waitCommand for train, as printed, against the kept box
        wait = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  train waitCommand: "))
        assert f"--kubeconfig {home / 'kubeconfig'}" in wait
        done = subprocess.run(["bash", "-c", wait], capture_output=True, text=True, timeout=patient(60))
        assert done.returncode == 0, done.stderr
        assert "train: Admitted=True" in done.stdout and "train: Finished=True (Succeeded: " in done.stdout, done.stdout
        assert re.search(r"^workload.kueue.x-k8s.io/\S+ condition met$", done.stdout, re.M), done.stdout
        # and its logsCommand (kubectl logs -f -l eks-training/job=train, through the apiserver from kwok's kubelet
        # server): the box's log of the training pod, what the Stage did and how the container ended
        logs = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  train logsCommand: "))
        assert f"--kubeconfig {home / 'kubeconfig'} logs " in logs, logs
        printed = _follow(logs, r"\[box\] pod training/train-0-\w+: Succeeded")
        pod = re.escape(f"[pod/{re.search(r'training/(train-0-[a-z0-9]+)', printed).group(1)}/worker]")  # type: ignore[union-attr]
        assert re.search(
            rf"^{pod} \[box\] pod training/train-0-\w+ \(Job train\) started on node cpu-0; container "
            rf"worker, image \S+: simulated by kwok, nothing ran$",
            printed,
            re.M,
        ), printed
        assert re.search(
            rf"^{pod} \[box\] container worker: runs 1000ms \(box.eks-training/run-ms\), then exits 0$", printed, re.M
        ), printed
        assert re.search(rf"^{pod} \[box\] container worker: exited 0 \(Completed\)$", printed, re.M), printed
        # the images pre-pulled on the nodes the jobs ran on: each DaemonSet's pods scheduled by the box's own
        # controller and scheduler onto every node of its group (selector and tolerations), Ready, awaited by nothing
        box = Box(name="rehearse-dev", workdir=tmp_path, binaries=binaries)

        def ready() -> list[dict]:
            items = box.get("daemonsets", "-n", "training", "-l", "eks-training/prepull")["items"]
            done = all(d["status"].get("desiredNumberScheduled") == d["status"].get("numberReady") == 1 for d in items)
            return items if items and done else []

        pulled = {}
        for ds in box.wait_for(ready, timeout_s=patient(60), what="the pre-pulls' pods Ready"):
            pods = box.get("pods", "-n", "training", "-l", f"eks-training/prepull={ds['metadata']['name']}")["items"]
            pulled[ds["metadata"]["name"]] = sorted(p["spec"]["nodeName"] for p in pods)
        # (none on the system node: dev's 20 GiB root volume is under the pre-pulls' least, stacks/plan/prepull.py)
        assert pulled == {"prepull-cpu-training": ["cpu-0"]}, pulled
        # the stack's copyCommand against the kept box: its pod is admitted by the apiserver (the namespace's Pod
        # Security), scheduled onto the system node and Ready; then it execs into the pod (test -d, then kubectl cp's
        # tar), which kwok does not serve, so the command fails there, and deletes the pod either way
        jobs = resolve(run_program("dev").outputs["jobs"])
        copy = box_command(resolve(jobs["train"]["copyCommand"]), binaries["kubectl"], home / "kubeconfig")
        copied = subprocess.run(["bash", "-c", copy], capture_output=True, text=True, timeout=patient(120))
        assert "pod/train-copy created" in copied.stdout and "pod/train-copy condition met" in copied.stdout, (
            copied.stdout + copied.stderr
        )
        assert copied.returncode != 0 and 'no exec found for container "copy"' in copied.stderr, copied.stderr
        box.wait_for(
            lambda: not box.get("pods", "-n", "training", "-l", "app.kubernetes.io/name=copy-results")["items"],
            timeout_s=patient(60),
            what="the copy pod deleted",
        )
        operators = json.loads((home / FILE).read_text())
        assert [o["name"] for o in operators] == ["kueue"]  # dev runs no MPIJob
        assert all(_runs(o["pid"], o["binary"]) for o in operators)
    finally:
        assert box_cli.main(["down", "--name", "rehearse-dev", "--workdir", str(tmp_path)]) == 0
    assert not any(_runs(o["pid"], o["binary"]) for o in operators)
    assert not home.exists()


def test_the_rehearse_command_prints_the_log_of_a_failed_jobs_pod(binaries, tmp_path, capsys) -> None:
    """``python -m stacks.rehearse --stack dev --exit-code train=2:worker --keep``: the training pod's worker exits 2
    (USAGE_ERROR_EXIT_CODE), the pod failure policy's FailJob fails the Job at once (nothing retried), pulumi up would
    fail there; the command exits 1 naming the job and prints the last lines of its pod's log (the failed container's,
    served by kwok from the box's file, read back with kubectl logs --tail), which say what the Stage did and the exit
    code. The job's waitCommand, against the kept box, ends at once with exit status 1 and Kueue's reason."""
    from stacks.box import cli as box_cli
    from stacks.box import rehearse_cli as rehearse

    code = rehearse.main(
        ["--stack", "dev", "--keep", "--workdir", str(tmp_path), "--timeout", "120", "--exit-code", "train=2:worker"]
    )
    out = capsys.readouterr().out
    box = Box(name="rehearse-dev", workdir=tmp_path, binaries=binaries)
    try:
        assert code == 1, out
        assert "FAILED: job(s) failed: train\n" in out, out
        shown = out.split("FAILED: job(s) failed: train\n", 1)[1]
        assert re.match(
            r"Last lines of the log of pod training/train-0-\w+ \(Job train, container worker, kubectl "
            r"logs --tail=10\):\n",
            shown,
        ), shown
        block = shown.split("\n\n", 1)[0].splitlines()[1:]
        assert re.fullmatch(
            r"  \[box\] pod training/train-0-\w+ \(Job train\) started on node cpu-0; container worker, "
            r"image \S+: simulated by kwok, nothing ran",
            block[0],
        ), block
        assert block[1:] == [
            "  [box] container worker: runs 1000ms (box.eks-training/run-ms), then exits 2 "
            "(box.eks-training/exit-code)",
            "  [box] container worker: exited 2 (Error)",
            f"  [box] pod training/{block[0].split('training/', 1)[1].split(' ', 1)[0]}: Failed",
        ], block
        # what the box says is what the apiserver has: the policy's FailJob, one pod, nothing retried
        job = box.get("job", "train", "-n", "training")
        conditions = {c["type"]: c for c in job["status"].get("conditions") or []}
        assert conditions["Failed"]["reason"] == "PodFailurePolicy", conditions
        assert len(box.get("pods", "-n", "training", "-l", "job-name=train")["items"]) == 1
        # the stack's waitCommand for train, as printed, ends at once with the failure: exit 1, and Kueue's reason
        wait = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  train waitCommand: "))
        done = subprocess.run(["bash", "-c", wait], capture_output=True, text=True, timeout=patient(60))
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "train: Finished=True (Failed: " in done.stdout, done.stdout
    finally:
        assert box_cli.main(["down", "--name", "rehearse-dev", "--workdir", str(tmp_path)]) == 0


def test_the_rehearse_command_fails_naming_what_waits_and_cleans_up(binaries, tmp_path, capsys) -> None:
    """Pods that run 10 minutes against a 40 s timeout: the command exits 1, prints the timeline and a FAILED line
    naming what pulumi up would still be waiting for (the staging Job, which it awaits); without ``--keep`` the
    operators it started (Kueue at least) are stopped and the box deleted: no process names the box's folder
    afterwards."""
    from stacks.box import rehearse_cli as rehearse

    code = rehearse.main(["--stack", "dev", "--workdir", str(tmp_path), "--timeout", "40", "--run-ms", "600000"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert re.search(r"^ +[\d.]+ s  started Kueue \(pid \d+", out, re.M), out
    failed = next(line for line in out.splitlines() if line.startswith("FAILED: "))
    assert (
        failed.startswith("FAILED: not done after 40 s; waiting: ") and "eks-training-dev-stage-cifar10-job" in failed
    ), failed
    assert "The box is brought down" in out
    assert not (tmp_path / "rehearse-dev").exists()
    assert not _processes_under(tmp_path), _processes_under(tmp_path)


def test_a_stack_without_jobs_rehearses_to_its_end(binaries, tmp_path, capsys) -> None:
    """The environment only (no jobs, no datasets: a documented stack, as the teams example's cluster stack): the
    rehearsal ends once every object it applied is ready, instead of waiting for jobs until its timeout."""
    import yaml

    from stacks.box import rehearse_cli as rehearse

    config = {k: v for k, v in stack_config("dev").items() if k not in ("eks-training:jobs", "eks-training:datasets")}
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    stack_file = tmp_path / "Pulumi.bare.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    argv = ["--stack", "bare", "--stack-file", str(stack_file), "--workdir", str(tmp_path / "box"), "--timeout", "120"]
    code = rehearse.main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "The stack has no jobs: every object it applies is ready." in out, out
