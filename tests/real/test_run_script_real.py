"""A job's own script runs under ``training/run_script.py`` as ``python SCRIPT`` runs it, and a rank that finished
cannot abort in the interpreter's finalisation (real processes).

The abort (``terminate called without an active exception``) comes from torch's C++ threads needing the GIL once
finalisation has begun; when it happens depends on thread timing. The stand-in here is deterministic: an object whose
finalizer aborts the process, alive in the script's module until the interpreter tears the module down. Under
``python SCRIPT`` it aborts every time (the control), under ``run_script.py`` never, while everything a program
expects at its end still happens (non-daemon threads joined, ``atexit`` handlers run, output flushed).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.wait import patient

REPO = Path(__file__).resolve().parents[2]
TRAINING = REPO / "training"
RUN_SCRIPT = TRAINING / "run_script.py"
if str(TRAINING) not in sys.path:
    sys.path.insert(0, str(TRAINING))


#: The user's program: a sibling module, its identity, a spawned child that calls a function of the script, a late
#: non-daemon thread, an atexit handler, a line written without a newline (stdio flushed at the end), an exit code
#: from its arguments, and a module-level object whose finalizer aborts (the stand-in for torch's threads).
PROGRAM = '''
import atexit, json, multiprocessing, os, sys, threading, time
import helper

OUT = sys.argv[1]

def square(x):
    return x * x

class AbortsInFinalisation:
    def __del__(self):
        os.abort()

def late_write():
    time.sleep(0.3)
    with open(os.path.join(OUT, "thread"), "w") as f:
        f.write("joined")

def at_exit():
    with open(os.path.join(OUT, "atexit"), "w") as f:
        f.write("ran")

if __name__ == "__main__":
    keep = AbortsInFinalisation()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        squares = pool.map(square, [3])
    with open(os.path.join(OUT, "seen.json"), "w") as f:
        json.dump({"name": __name__, "file": __file__, "argv": sys.argv, "path0": sys.path[0],
                   "helper": helper.VALUE, "squares": squares}, f)
    threading.Thread(target=late_write).start()
    atexit.register(at_exit)
    sys.stdout.write("no newline at the end")
    how = sys.argv[2]
    if how == "raise":
        raise RuntimeError("the program failed")
    if how == "message":
        sys.exit("a message")
    if how != "return":
        sys.exit(int(how))
'''


def program(tmp_path: Path) -> Path:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "helper.py").write_text("VALUE = 42\n")
    (folder / "program.py").write_text(PROGRAM)
    return folder / "program.py"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-u", *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=patient(60)
    )


def test_the_stand_in_aborts_a_finished_program_run_as_python_runs_it(tmp_path: Path) -> None:
    """The control: the finalizer's abort is what a finished rank's exit status shows without run_script.py."""
    script = program(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    done = run([str(script), str(out), "return"], tmp_path)
    assert done.returncode == -signal.SIGABRT, (done.returncode, done.stderr)
    assert (out / "atexit").is_file() and (out / "thread").is_file()


@pytest.mark.parametrize("how, code", [("return", 0), ("0", 0), ("3", 3), ("message", 1), ("raise", 1)])
def test_run_script_runs_the_program_as_python_does_and_ends_with_its_code(tmp_path: Path, how: str, code: int) -> None:
    script = program(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    # torchrun starts its workers from the job's folder (the pod's working directory) with the script's path
    done = run([str(RUN_SCRIPT), str(script), str(out), how], tmp_path)
    assert done.returncode == code, (done.returncode, done.stderr)
    seen = json.loads((out / "seen.json").read_text())
    assert seen == {
        "name": "__main__",
        "file": str(script),
        "argv": [str(script), str(out), how],
        "path0": str(script.parent),
        "helper": 42,
        "squares": [9],
    }
    assert (out / "thread").read_text() == "joined", "a non-daemon thread was not joined"
    assert (out / "atexit").read_text() == "ran", "the atexit handlers did not run"
    assert done.stdout.endswith("no newline at the end")
    if how == "raise":
        assert "RuntimeError: the program failed" in done.stderr and "Traceback" in done.stderr
    if how == "message":
        assert done.stderr.strip().endswith("a message")
    assert "Aborted" not in done.stderr and "Fatal Python error" not in done.stderr


#: What a program leaves for the interpreter's end, each of which ``python SCRIPT`` handles: a module-level
#: ThreadPoolExecutor (its workers stop through threading's exit hook), a class of the script pickled by a late thread
#: and by an atexit handler (the script stays ``__main__``), a file written and never closed (flushed when freed).
LEFTOVERS = '''
import atexit, concurrent.futures, os, pickle, sys, threading, time

OUT = sys.argv[1]
POOL = concurrent.futures.ThreadPoolExecutor(2)


class Settings:
    def __init__(self, lr):
        self.lr = lr


def work():
    return 7


def save(name):
    with open(os.path.join(OUT, name), "wb") as f:
        pickle.dump(Settings(0.1), f)


def late():
    time.sleep(0.3)
    save("thread.pkl")


if __name__ == "__main__":
    assert POOL.submit(work).result() == 7
    threading.Thread(target=late).start()
    atexit.register(save, "atexit.pkl")
    LOG = open(os.path.join(OUT, "never-closed.csv"), "w")
    LOG.write("step,loss\\n1,0.5\\n")
    if sys.argv[2] == "interrupt":
        raise KeyboardInterrupt
'''


@pytest.mark.parametrize("runner", ["python", "run_script"])
def test_what_a_program_leaves_at_its_end_is_handled_as_python_handles_it(tmp_path: Path, runner: str) -> None:
    """The same outcome under ``python SCRIPT`` and ``run_script.py SCRIPT``: no hang on the pool's workers, both
    pickles written, the unclosed file's lines on disk."""
    script = tmp_path / "leftovers.py"
    script.write_text(LEFTOVERS)
    out = tmp_path / "out"
    out.mkdir()
    argv = [str(script)] if runner == "python" else [str(RUN_SCRIPT), str(script)]
    done = run([*argv, str(out), "finish"], tmp_path)
    assert done.returncode == 0, done.stderr
    for name in ("thread.pkl", "atexit.pkl"):
        assert (out / name).stat().st_size > 0, (name, done.stderr)
    assert (out / "never-closed.csv").read_text() == "step,loss\n1,0.5\n"


def test_ctrl_c_ends_the_program_by_sigint_as_python_does(tmp_path: Path) -> None:
    script = tmp_path / "leftovers.py"
    script.write_text(LEFTOVERS)
    out = tmp_path / "out"
    out.mkdir()
    plain = run([str(script), str(out), "interrupt"], tmp_path)
    wrapped = run([str(RUN_SCRIPT), str(script), str(out), "interrupt"], tmp_path)
    assert plain.returncode == wrapped.returncode == -signal.SIGINT, (plain.returncode, wrapped.returncode)
    assert "KeyboardInterrupt" in wrapped.stderr
