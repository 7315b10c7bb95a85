"""Run a script as many short two-rank runs, each rank a process forked from this one after torch is imported.

``python fork_ranks.py SPEC.json``: SPEC holds ``script`` (run as ``__main__`` with :func:`runpy.run_path`, as
``python script`` runs it), ``runs``: a list of ``{"ranks": [{"argv": [...], "env": {...}, "log": path}, ...]}``.
For each run the ranks are forked at once, each with its environment set, its output sent to its log and its
``sys.argv`` set; a rank that returns from the script ends as a Python program does, through the interpreter's
finalisation (what ``end_process`` skips), so an abort there shows in its exit status. One JSON line per run on
stdout: ``{"run": i, "codes": [...]}`` (a negative code: the signal that ended the rank). Importing torch once and
forking keeps each run to the work the script does, so a test can end dozens of runs within its tier's budget.
"""

import json
import os
import runpy
import sys

import torch  # noqa: F401  (imported before forking: the children start with it loaded)
import torch._dynamo  # noqa: F401  (what torch.optim imports as the first optimizer is made: a second per rank)
import torch.distributed  # noqa: F401
import torch.nn.parallel  # noqa: F401


def rank(script: str, argv: list[str], env: dict[str, str], log: str) -> None:
    """The child: become ``python script argv`` with ``env``, output in ``log``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [script, *argv]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.exit(code)  # the interpreter's own exit: finalisation runs
    sys.exit(0)


def main() -> int:
    spec = json.loads(open(sys.argv[1]).read())
    for i, run in enumerate(spec["runs"]):
        pids = []
        for r in run["ranks"]:
            pid = os.fork()
            if pid == 0:
                rank(spec["script"], r["argv"], r["env"], r["log"])
            pids.append(pid)
        codes = []
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            codes.append(os.waitstatus_to_exitcode(status))
        print(json.dumps({"run": i, "codes": codes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
