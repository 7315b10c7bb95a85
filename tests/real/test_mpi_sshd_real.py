"""An MPIJob's launcher reaching its workers through real sshd, for every MPI image the repository ships.

On the cluster the launcher runs ``mpirun`` (built by :func:`~components.workloads.mpi.mpi_launcher`), which ssh-es
into each worker pod, where the image's sshd (run as the unprivileged ``mpiuser`` with the image's ``sshd_config``)
starts a session with an environment of its own making: sshd's default PATH, no LD_LIBRARY_PATH, none of the image's
``ENV``. Open MPI's ``orted`` and then the ranks start in that session. Here (:mod:`tests.mpi_sshd`, as root, in
mount and UTS namespaces): Debian's ``openssh-server`` for each of two workers (separate sshd processes on 127.0.0.2
and 127.0.0.3, each with its own /tmp and hostname), the launcher with the exact command line and environment of the
component's functions, the container environment from the image's Dockerfile ``ENV`` lines, the image's Open MPI at
its ``OPAL_PREFIX`` (Debian's relocated there, this machine's own copy hidden), and a C program built with ``mpicc``
in place of the job's GPU program (no GPU here): 2 ranks per worker all-reduce, each reporting its host and the
library it loaded from the image's LD_LIBRARY_PATH. Both the program and that library live where only the image's
PATH and LD_LIBRARY_PATH find them, as nccl-tests' binaries and libnccl do.

The same run with each bug put back must fail: ``mpirun`` by name (the workers' ``orted`` is not on sshd's PATH),
and without forwarding the image's PATH and LD_LIBRARY_PATH (the ranks lose the image's environment).

Needs root (namespaces, mounts), ``sshd`` (Debian's openssh-server), ``mpicc`` (libopenmpi-dev) and Debian's Open
MPI: ``.ci/run`` installs them; a missing one fails the test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.image.dockerfile import Dockerfile
from components.workloads.mpi import (
    SSHD_COMMAND,
    WORKERS_WAIT_SCRIPT,
    mpi_launcher,
    mpi_worker_hosts,
    mpirun_path,
    workers_wait_command,
)
from components.workloads.pods import camel, env_list
from components.workloads.spec import JobSpec, WorkerPlacement
from stacks.ports import free_port
from tests.harness import REPO
from tests.kube import container_env, process_argv
from tests.wait import patient

#: Debian's sshd gives a session this PATH (openssh's configure --with-default-path, debian/rules:
#: https://salsa.debian.org/ssh-team/openssh/-/blob/debian/1%259.2p1-2/debian/rules); the test checks it is what the
#: sessions get.
SSHD_SESSION_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"
#: Where the operator mounts the hostfile is /etc/mpi/hostfile; here it is a file of the image's /opt.
HOSTFILE = "/opt/operator/hostfile"
JOB, NAMESPACE, NODES, SLOTS = "bench", "training", 2, 2
PLACEMENT: WorkerPlacement = {
    "node_selector": {},
    "tolerations": [],
    "cpu_millis": 1000,
    "memory_mib": 2048,
    "gpus": 0,
    "efa_devices": 0,
    "shm_mib": 256,
    "procs_per_node": SLOTS,
    "threads_per_proc": 1,
}
RUN_TIMEOUT = 120
#: What the MPI Operator appends to an OpenMPI launcher's environment (v0.8.0, the catalog's release:
#: https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go#L169-L219 and
#: #L1582-L1606): fully qualified worker names (the hostfile's), the hostfile, ssh retries, the slots, no GPU for the
#: launcher.
OPERATOR_LAUNCHER_ENV = {
    "K_MPI_JOB_ROLE": "launcher",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_default_hostfile": HOSTFILE,
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    "OMPI_MCA_orte_set_default_slots": str(SLOTS),
    "NVIDIA_VISIBLE_DEVICES": "",
    "NVIDIA_DRIVER_CAPABILITIES": "",
}
PROGRAM = "mpi_allreduce_check"
LIBRARY = "libimagelib.so"

PROGRAM_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
const char *image_library(void);
int main(int argc, char **argv) {
    int rank, size, mine, sum = 0;
    char host[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gethostname(host, sizeof host);
    printf("{\"rank\": %d, \"size\": %d, \"sum\": %d, \"host\": \"%s\", \"library\": \"%s\", \"path\": \"%s\"}\n",
           rank, size, sum, host, image_library(), getenv("PATH") ? getenv("PATH") : "");
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
"""
LIBRARY_C = 'const char *image_library(void) { return "%s"; }\n'


def mpi_images() -> list[Path]:
    """Every image of the repository whose workers run sshd (the MPI images): images/*/ with an sshd_config whose
    Dockerfile's command is the component's sshd."""
    found = []
    for sshd_config in sorted((REPO / "images").glob("*/sshd_config")):
        ins = Dockerfile.read(sshd_config.parent / "Dockerfile").instructions
        if ("CMD", json.dumps(list(SSHD_COMMAND))) in ins:
            found.append(sshd_config.parent)
    return found


def test_the_mpi_images_are_found() -> None:
    assert [p.name for p in mpi_images()] == ["horovod", "nccl-tests"]


def _tool(name: str, package: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").exists() else None)
    assert found, f"{name} not found: install Debian's {package} (.ci/run does: apt-get install -y {package})"
    return found


def _first_outside(paths: str, excluded: list[str]) -> str | None:
    """The first folder of a PATH-like list that no folder of ``excluded`` is, or is under."""
    for p in paths.split(":"):
        if p and not any(p == e or p.startswith(e.rstrip("/") + "/") for e in excluded):
            return p
    return None


def _launcher(image_env: dict[str, str], prefix: str) -> tuple[list[str], dict[str, str]]:
    """The launcher's argv and environment as the component builds them and Kubernetes expands them."""
    spec: JobSpec = {
        "job_name": JOB,
        "namespace": NAMESPACE,
        "pvc_name": "shared",
        "image": "mpi",
        "output_dir": "/opt/output",
    }
    hosts = mpi_worker_hosts(JOB, NAMESPACE, NODES)
    command, env = mpi_launcher(
        spec,
        PLACEMENT,
        nodes=NODES,
        slots=SLOTS,
        program=[PROGRAM],
        hosts=hosts,
        mpi_prefix=prefix,
        hostfile=HOSTFILE,
        port=free_port(),
    )
    container = camel({"command": command, "env": env_list(env)})
    pod_env = container_env(container)
    # what the container runtime starts the process with: the image's ENV, HOME of the image's user, the pod's env,
    # and what the operator appends to the launcher's (OPERATOR_LAUNCHER_ENV)
    return process_argv(container, pod_env), {**image_env, "HOME": "/home/mpiuser", **pod_env, **OPERATOR_LAUNCHER_ENV}


def _prepare(image: Path, work: Path) -> dict[str, Any]:
    dockerfile = Dockerfile.read(image / "Dockerfile")
    image_env = dockerfile.env()
    prefix = dockerfile.mpi_prefix()
    assert prefix and prefix.startswith("/opt/"), (
        f"{image.name}: ENV OPAL_PREFIX under /opt (the test lays it out there)"
    )
    # the program where only the image's PATH finds it, the library where only its LD_LIBRARY_PATH does
    bin_dir = _first_outside(image_env["PATH"], [*SSHD_SESSION_PATH.split(":"), f"{prefix}/bin"])
    lib_dir = _first_outside(image_env.get("LD_LIBRARY_PATH", ""), [prefix, "/usr/lib", "/lib"])
    assert bin_dir, image.name
    build = work / "build"
    build.mkdir()
    (build / "prog.c").write_text(PROGRAM_C)
    files: dict[str, dict[str, str]] = {bin_dir: {PROGRAM: str(build / PROGRAM)}}
    link = []
    lib_text = f"{lib_dir}/{LIBRARY}" if lib_dir else "linked in"
    (build / "lib.c").write_text(LIBRARY_C % lib_text)
    if lib_dir:
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(build / LIBRARY), str(build / "lib.c")], check=True)
        files[lib_dir] = {LIBRARY: str(build / LIBRARY)}
        link = ["-L", str(build), "-limagelib"]
    else:
        link = [str(build / "lib.c")]
    subprocess.run(
        [_tool("mpicc", "libopenmpi-dev"), str(build / "prog.c"), *link, "-o", str(build / PROGRAM)], check=True
    )

    hosts = mpi_worker_hosts(JOB, NAMESPACE, NODES)
    files["/opt/operator"] = {"hostfile": str(work / "hostfile")}
    (work / "hostfile").write_text("".join(f"{h} slots={SLOTS}\n" for h in hosts))  # the operator's hostfile

    # the image's home: sshd's config and host keys (as the Dockerfile makes them), the operator's key
    home = work / "home"
    (home / ".ssh_host").mkdir(parents=True)
    (home / ".ssh").mkdir()
    for kind, extra in (("ed25519", []), ("rsa", ["-b", "3072"])):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", kind, *extra, "-N", "", "-f", str(home / ".ssh_host" / f"ssh_host_{kind}_key")],
            check=True,
        )
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-N", "", "-f", str(home / ".ssh" / "id_rsa")], check=True
    )
    shutil.copy(home / ".ssh" / "id_rsa.pub", home / ".ssh" / "authorized_keys")
    shutil.copy(image / "sshd_config", home / ".sshd_config")
    for p in [home, *home.rglob("*")]:
        os.chown(p, 1000, 1000)
    ssh_config_d = work / "ssh_config.d"
    ssh_config_d.mkdir()
    shutil.copy(image / "ssh_config", ssh_config_d / "mpi-operator.conf")
    ports = re.findall(r"^Port\s+(\d+)", (image / "sshd_config").read_text(), re.M)
    assert ports == re.findall(r"^\s*Port\s+(\d+)", (image / "ssh_config").read_text(), re.M), "client and server agree"

    argv, env = _launcher(image_env, prefix)
    assert argv[0] == mpirun_path(prefix)
    return {
        "work": str(work),
        "prefix": prefix,
        "files": files,
        "home": str(home),
        "ssh_config_d": str(ssh_config_d),
        "port": int(ports[0]),
        "timeout": RUN_TIMEOUT,
        "workers": [{"host": h, "addr": f"127.0.0.{2 + i}", "hostname": h.split(".")[0]} for i, h in enumerate(hosts)],
        "worker_command": list(SSHD_COMMAND),
        "worker_env": {**{k: v for k, v in env.items() if k not in OPERATOR_LAUNCHER_ENV}, "K_MPI_JOB_ROLE": "worker"},
        "launcher_hostname": f"{JOB}-launcher",
        "launcher_command": argv,
        "launcher_env": env,
        "lib_dir": lib_dir,
        "bin_dir": bin_dir,
    }


def _run(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    assert os.geteuid() == 0, "the sshd test lays out the image in mount namespaces: run it as root (CI does)"
    _tool("sshd", "openssh-server")
    path = work / "spec.json"
    path.write_text(json.dumps(spec))
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "tests.mpi_sshd", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=patient(RUN_TIMEOUT + 60),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ranks(output: str) -> list[dict[str, Any]]:
    return sorted(
        (json.loads(line) for line in output.splitlines() if line.startswith('{"rank"')), key=lambda r: r["rank"]
    )


def _without_image_env(argv: list[str], names: tuple[str, ...] = ("PATH", "LD_LIBRARY_PATH")) -> list[str]:
    """``argv`` without ``-x NAME`` for each of ``names``."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a == "-x" and i + 1 < len(argv) and argv[i + 1] in names:
            skip = True
            continue
        out.append(a)
    return out


@pytest.mark.parametrize("image", mpi_images(), ids=lambda p: p.name)
def test_ranks_start_through_sshd_find_their_libraries_and_orted_and_all_reduce(image: Path, tmp_path: Path) -> None:
    spec = _prepare(image, tmp_path)
    result = _run(spec, tmp_path)
    assert result["code"] == 0, result
    ranks = _ranks(result["launcher"])
    size = NODES * SLOTS
    assert [r["rank"] for r in ranks] == list(range(size)), result["launcher"][-3000:]
    assert all(r["size"] == size and r["sum"] == size * (size + 1) // 2 for r in ranks)
    # SLOTS ranks on each worker (the workers' hostnames: their own UTS namespaces), none on the launcher
    assert sorted(r["host"] for r in ranks) == sorted(w["hostname"] for w in spec["workers"] for _ in range(SLOTS))
    # the ranks have the image's PATH (forwarded), and loaded the library of its LD_LIBRARY_PATH
    # (Open MPI's --prefix puts <prefix>/bin first)
    assert {r["path"] for r in ranks} == {f"{spec['prefix']}/bin:{spec['launcher_env']['PATH']}"}
    if spec["lib_dir"]:
        assert {r["library"] for r in ranks} == {f"{spec['lib_dir']}/{LIBRARY}"}
    for log in result["workers"].values():
        assert "Accepted publickey for mpiuser" in log, log[-2000:]


#: Longer than the ssh retries the operator gives mpirun (``ConnectionAttempts=10``, one a second): workers whose
#: image pull or code download takes this long are not there when a launcher that does not wait for them runs.
WORKER_DELAY_S = 15
#: Where the launcher's init container finds the toolbox's script here (the image's /app).
TOOLBOX_APP = "/opt/app"


def _with_late_workers(spec: dict[str, Any], *, wait: bool) -> dict[str, Any]:
    """``spec`` with workers that start :data:`WORKER_DELAY_S` after the launcher's pod, which runs its
    ``wait-for-workers`` init container first (the component's command, Debian's python3) or, with ``wait`` false,
    starts ``mpirun`` at once."""
    spec["worker_delay_s"] = WORKER_DELAY_S
    if not wait:
        spec["launcher_with_workers"] = True
        return spec
    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python, "Debian's python3 runs the launcher's init container here (.ci/run installs it)"
    argv = workers_wait_command([w["host"] for w in spec["workers"]], spec["port"])
    assert argv[:2] == ["python", WORKERS_WAIT_SCRIPT], argv
    spec["files"][TOOLBOX_APP] = {
        Path(WORKERS_WAIT_SCRIPT).name: str(REPO / "training" / Path(WORKERS_WAIT_SCRIPT).name)
    }
    spec["launcher_init"] = [python, f"{TOOLBOX_APP}/{Path(WORKERS_WAIT_SCRIPT).name}", *argv[2:]]
    return spec


@pytest.mark.parametrize("image", mpi_images(), ids=lambda p: p.name)
def test_the_launcher_waits_for_workers_that_start_late(image: Path, tmp_path: Path) -> None:
    """MPI Operator v0.8.0 starts a queued MPIJob's launcher together with its workers, whatever its
    ``launcherCreationPolicy`` (kubeflow/mpi-operator#615). Its ``wait-for-workers`` init container holds it until
    every worker's sshd listens, however late they start; then the ranks all-reduce."""
    spec = _with_late_workers(_prepare(image, tmp_path), wait=True)
    result = _run(spec, tmp_path)
    assert result["init_code"] == 0, result
    events = [json.loads(line) for line in result["init"].splitlines() if line.startswith("{")]
    ready = [e for e in events if e["event"] == "worker_ready"]
    assert sorted(e["host"] for e in ready) == sorted(w["host"] for w in spec["workers"]), result["init"]
    assert all(e["time"] >= result["workers_at"] for e in ready), (result["workers_at"], result["init"])
    assert events[0]["event"] == "waiting" and events[-1]["event"] == "all_ready", result["init"]
    assert result["code"] == 0, result
    assert len(_ranks(result["launcher"])) == NODES * SLOTS, result["launcher"][-3000:]


@pytest.mark.parametrize("image", mpi_images()[:1], ids=lambda p: p.name)
def test_a_launcher_that_does_not_wait_fails_with_late_workers(image: Path, tmp_path: Path) -> None:
    """The control: the launcher runs ``mpirun`` as its workers' pods start; ssh gives up before their sshd listens."""
    spec = _with_late_workers(_prepare(image, tmp_path), wait=False)
    result = _run(spec, tmp_path)
    assert result["init"] == "" and result["code"] != 0 and _ranks(result["launcher"]) == [], result


@pytest.mark.parametrize("image", mpi_images(), ids=lambda p: p.name)
def test_mpirun_called_by_name_does_not_find_the_workers_orted(image: Path, tmp_path: Path) -> None:
    """Item 4 put back: ``mpirun`` by name. sshd's PATH has no Open MPI of the image, so the workers' orted is not
    found (and in an image whose PATH lacks its own MPI, the launcher's mpirun is not either)."""
    spec = _prepare(image, tmp_path)
    spec["launcher_command"] = ["mpirun", *spec["launcher_command"][1:]]
    result = _run(spec, tmp_path)
    assert result["code"] != 0 and _ranks(result["launcher"]) == [], result


@pytest.mark.parametrize(
    "image, dropped",
    [*((p, ("PATH", "LD_LIBRARY_PATH")) for p in mpi_images()), (REPO / "images" / "nccl-tests", ("LD_LIBRARY_PATH",))],
    ids=lambda v: v.name if isinstance(v, Path) else "-".join(v),
)
def test_ranks_without_the_images_path_or_library_path_fail(
    image: Path, dropped: tuple[str, ...], tmp_path: Path
) -> None:
    """Item 3 put back: only the job's variables forwarded. The ranks get sshd's session PATH, where the program is
    not, and orted's library path, where the image's libraries other than MPI's are not (nccl-tests: libnccl's
    folder; the test's library stands there)."""
    spec = _prepare(image, tmp_path)
    spec["launcher_command"] = _without_image_env(spec["launcher_command"], dropped)
    assert not set(dropped) & set(spec["launcher_command"])
    result = _run(spec, tmp_path)
    assert result["code"] != 0 and _ranks(result["launcher"]) == [], result
    if dropped == ("LD_LIBRARY_PATH",):
        assert f"{LIBRARY}: cannot open shared object file" in result["launcher"], result["launcher"][-2000:]
