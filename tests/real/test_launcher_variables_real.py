"""The launchers set the variables the catalog says they do (components.catalog.environment.py), in each process they
start: the config refuses a job's ``$(NAME)`` naming one (Kubernetes expands it
in the container, where it is not set). Runs torchrun from the test's virtualenv and Debian's Open MPI mpirun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from components.catalog.environment import MPIRUN, TORCHRUN
from tests.wait import patient

#: Writes the names in its environment to a file of its own (the process id names it).
DUMP = (
    "import json, os, sys; open(os.path.join(sys.argv[1], str(os.getpid())), 'w').write(json.dumps(sorted(os.environ)))"
)


def _names(folder: Path) -> list[set[str]]:
    return [set(json.loads(p.read_text())) for p in sorted(folder.iterdir())]


def _env() -> dict[str, str]:
    """The test's environment without any launcher's variables (as a container's, before its launcher runs)."""
    launched = TORCHRUN.variables | MPIRUN.variables
    return {k: v for k, v in os.environ.items() if k not in launched}


def test_torchrun_sets_its_variables_in_each_worker(tmp_path: Path) -> None:
    script = tmp_path / "dump.py"
    script.write_text(DUMP + "\n")
    out = tmp_path / "env"
    out.mkdir()
    torchrun = Path(sys.executable).with_name("torchrun")
    argv = [str(torchrun), "--standalone", "--nproc-per-node=2", str(script), str(out)]
    subprocess.run(argv, env=_env(), check=True, timeout=patient(120), capture_output=True)
    workers = _names(out)
    assert len(workers) == 2
    for names in workers:
        assert TORCHRUN.variables <= names, sorted(TORCHRUN.variables - names)


def test_mpirun_sets_its_variables_in_each_rank(tmp_path: Path) -> None:
    out = tmp_path / "env"
    out.mkdir()
    env = _env()
    if os.geteuid() == 0:
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    argv = ["mpirun", "--oversubscribe", "-np", "2", sys.executable, "-c", DUMP, str(out)]
    subprocess.run(argv, env=env, check=True, timeout=patient(120), capture_output=True)
    ranks = _names(out)
    assert len(ranks) == 2
    for names in ranks:
        assert MPIRUN.variables <= names, sorted(MPIRUN.variables - names)
