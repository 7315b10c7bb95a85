"""``python -m stacks.local`` stopped by SIGTERM (``timeout``, a CI cancel, ``kill``) stops its jobs' processes as
Ctrl-C does, and Ctrl-C says so, without a traceback. Without a handler Python would die on the signal at once,
skipping the runner's clean-up, and the job's processes, in sessions of their own, would run on orphaned (a
crash-looping torchrun restarting its workers for good)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from components.workloads.spec import DEFAULT_STOP_GRACE_S
from stacks.local import processes
from tests.conftest import sigint_at_its_default
from tests.harness import REPO
from tests.wait import patient

SLEEPER = (
    "import os, pathlib, time; pathlib.Path(os.environ['OUTPUT_DIR'], 'pid').write_text(str(os.getpid())); "
    "time.sleep(600)"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int, within_s: float) -> bool:
    """Whether process ``pid`` is gone within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize(
    "sig, said",
    [
        (signal.SIGTERM, "stopped (SIGTERM): the jobs were stopped; run the same command again to resume"),
        # Ctrl-C: the terminal's foreground group is the runner alone (the jobs run in sessions of their own)
        (signal.SIGINT, "interrupted: the jobs were stopped; run the same command again to resume"),
    ],
    ids=["SIGTERM", "Ctrl-C"],
)
def test_a_stop_signal_stops_the_jobs_processes(tmp_path: Path, sig: signal.Signals, said: str) -> None:
    stack = {
        "config": {
            "aws:region": "us-east-1",
            "eks-training:nodeGroups": {
                "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 1, "maxSize": 1}
            },
            "eks-training:jobs": {
                "sleep": {"kind": "command", "nodeGroup": "cpu", "command": ["python", "-c", SLEEPER]}
            },
        }
    }
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump(stack))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cli = subprocess.Popen(
        [sys.executable, "-m", "stacks.local", "--stack", "t", "--quiet"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    job = None
    try:
        deadline = time.monotonic() + patient(120)
        while job is None and time.monotonic() < deadline and cli.poll() is None:
            found = list((tmp_path / ".local" / "t" / "shared" / "runs").glob("sleep-*/pid"))
            if found and found[0].read_text():
                job = int(found[0].read_text())
            time.sleep(0.2)
        assert job is not None and _alive(job), cli.communicate(timeout=patient(30))[0].decode(errors="replace")[-3000:]
        cli.send_signal(sig)
        out = cli.communicate(timeout=patient(60))[0].decode(errors="replace")
        assert cli.returncode == 128 + sig, (cli.returncode, out[-3000:])
        assert said in out and "Traceback" not in out, out[-3000:]
        # the job's stopGracePeriodSeconds (the default), said while the runner waits
        stopping = (
            f"[local] job sleep: stopping its processes, {DEFAULT_STOP_GRACE_S} s at most; Ctrl-C again kills them"
        )
        assert stopping in out, out[-3000:]
        assert _gone(job, patient(30)), f"the job's process {job} outlived the runner"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if job is not None and _alive(job):
            os.kill(job, signal.SIGKILL)


def _sigint_in_a_child() -> str:
    """How a process started now sees SIGINT: ``ignored`` or ``default`` (KeyboardInterrupt)."""
    code = "import signal; print('ignored' if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 'default')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_a_test_run_that_inherited_sigint_ignored_gives_its_commands_the_default() -> None:
    """The Ctrl-C case above in a test run started in a script's background (``bash -c 'pytest &'`` ignores SIGINT in
    it): ``tests/conftest.py`` gives the commands the tests start SIGINT's default again, else the runner would never
    see the test's Ctrl-C."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        inherited = _sigint_in_a_child()
        sigint_at_its_default()
        given = _sigint_in_a_child()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (inherited, given) == ("ignored", "default")


#: A pod's process that starts a child in a session of its own (as the launcher starts torchrun), both deaf to SIGTERM
#: (a stop checkpoint that outlasts the grace period).
DEAF_TREE = (
    "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(flush=True); time.sleep(600)'], "
    "start_new_session=True, stdout=subprocess.PIPE); child.stdout.readline(); print(child.pid, flush=True); "
    "time.sleep(600)"
)


#: A pod's process whose stop takes ``argv[2]`` seconds (a stop checkpoint), then writes when its stop began and ended.
SLOW_STOP = (
    "import json, pathlib, signal, sys, time\n"
    "def stop(*_):\n"
    "    began = time.time(); time.sleep(float(sys.argv[2]))\n"
    "    pathlib.Path(sys.argv[1]).write_text(json.dumps([began, time.time()])); sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, stop); print(flush=True); time.sleep(600)\n"
)


def test_stopped_pods_all_get_their_grace_at_once(tmp_path: Path) -> None:
    """The runner signals every pod, then waits out one grace period for all of them, as the Job controller deletes a
    failed job's pods together: each pod's stop takes 1.5 s of a 3 s grace, both finish theirs, and the second began
    its stop before the first ended it (one pod after the other, a job's stop took a grace period per pod)."""
    markers = [tmp_path / f"pod{i}" for i in range(2)]
    pods = [
        subprocess.Popen(
            [sys.executable, "-c", SLOW_STOP, str(m), "1.5"], stdout=subprocess.PIPE, start_new_session=True
        )
        for m in markers
    ]
    try:
        for pod in pods:
            assert pod.stdout is not None
            pod.stdout.readline()  # its handler is set
        processes.stop(pods, grace_s=patient(3.0))
        assert [p.returncode for p in pods] == [0, 0]
        (began0, ended0), (began1, ended1) = [json.loads(m.read_text()) for m in markers]
        assert max(began0, began1) < min(ended0, ended1)
    finally:
        for pod in pods:
            if pod.poll() is None:
                pod.kill()


#: DEAF_TREE whose own process ends at SIGTERM; only the child it started is deaf to it.
CHILD_DEAF_TREE = DEAF_TREE.replace("signal.signal(signal.SIGTERM, signal.SIG_IGN); child", "child", 1)


@pytest.mark.parametrize(
    "tree, ended_by",
    [(DEAF_TREE, signal.SIGKILL), (CHILD_DEAF_TREE, signal.SIGTERM)],
    ids=["the pod outlasts its grace", "the pod exits, what it started does not"],
)
def test_what_a_stopped_pod_started_is_killed_once_its_grace_is_over(tree: str, ended_by: signal.Signals) -> None:
    """After the grace period the runner kills the pod's process group and every process it started, in sessions of
    their own too, whether the pod's own process outlasted the grace or ended at SIGTERM, as a container's processes
    all end with it: the launcher's torchrun and its workers are not left running."""
    assert CHILD_DEAF_TREE != DEAF_TREE
    pod = subprocess.Popen([sys.executable, "-c", tree], stdout=subprocess.PIPE, start_new_session=True)
    child = None
    try:
        assert pod.stdout is not None
        child = int(pod.stdout.readline())
        assert _alive(child) and os.getpgid(child) != pod.pid  # in a session of its own
        processes.stop([pod], grace_s=0.5)
        assert pod.returncode == -ended_by
        assert _gone(child, patient(10)), f"the pod's child {child} outlived it"
    finally:
        if pod.poll() is None:
            pod.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)
