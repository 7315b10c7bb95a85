"""A killed test run's processes are found by their run's tag and stopped; a live run's never are. The search reads a
``/proc`` written here (a real one would show other runs' processes, which this test must not stop)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests import orphans
from tests.wait import patient


def _process(proc: Path, pid: int, started: int, command: str, tag: str | None = None) -> None:
    """A process in the ``/proc`` at ``proc``: its stat (state S, start time ``started``), command line and
    environment."""
    folder = proc / str(pid)
    folder.mkdir()
    fields = ["S", *["0"] * 18, str(started)]  # fields 3 to 22
    (folder / "stat").write_text(f"{pid} ({command.split()[0]}) {' '.join(fields)} 0 0\n")
    (folder / "cmdline").write_bytes(command.replace(" ", "\0").encode() + b"\0")
    env = [b"PATH=/usr/bin", *([f"{orphans.RUN_ENV}={tag}".encode()] if tag else [])]
    (folder / "environ").write_bytes(b"\0".join(env) + b"\0")


def test_the_processes_of_runs_that_are_gone_are_found(tmp_path: Path) -> None:
    _process(tmp_path, 200, 5000, "python -m pytest -n 4")  # a run that is still going, untagged itself
    _process(tmp_path, 101, 5100, "kube-apiserver --etcd-prefix=/registry", tag="7:1")  # its run's pid is gone
    _process(tmp_path, 102, 5200, "etcd --name node0", tag="200:5000")  # the live run's
    _process(tmp_path, 103, 5300, "torchrun --nnodes=1:2", tag="200:4000")  # pid 200 was another process then
    _process(tmp_path, 104, 5400, "vim notes.md")  # not a test's
    (tmp_path / "self").mkdir()
    found = orphans.orphans(tmp_path)
    assert found == {101: "kube-apiserver --etcd-prefix=/registry", 103: "torchrun --nnodes=1:2"}


def test_the_tag_names_one_process_even_after_its_pid_is_reused() -> None:
    tag = orphans.this_run()
    pid, started = tag.split(":")
    assert int(pid) == os.getpid() and started.isdigit() and orphans.alive(tag)
    assert orphans.start_time(os.getpid()) == started
    assert not orphans.alive(f"{pid}:{int(started) + 1}")
    assert not orphans.alive("4194305:1") and not orphans.alive("nonsense")
    # this run tagged itself at its start: every process the tests start inherits the tag
    assert orphans.alive(os.environ[orphans.RUN_ENV])


def test_stop_terms_then_kills_what_ignores_sigterm() -> None:
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(99)"
    children = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for code in ("print(1, flush=True); import time; time.sleep(99)", ignores)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline() == "1\n"  # its handler is set
        orphans.stop([c.pid for c in children], grace_s=patient(2))
        assert [c.wait(timeout=patient(10)) for c in children] == [-signal.SIGTERM, -signal.SIGKILL]
    finally:
        for child in children:
            child.kill()
            child.wait()
