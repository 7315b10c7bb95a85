"""An MPIJob's pods on this machine, for tests/real/test_mpi_sshd_real.py: run as ``unshare --mount --propagation
private python -m tests.mpi_sshd SPEC.json`` (root), it lays out the image's file system in its own mount namespace and
starts the workers' sshd and the launcher as the image's unprivileged user, each in a mount and UTS namespace of its own
(its own ``/tmp`` and hostname, as a pod has), then prints one JSON object: the launcher's exit code and output and
the workers' sshd logs.

What comes from the image (the spec, read from its Dockerfile and build context by the test):

* its Open MPI at the image's prefix (``OPAL_PREFIX``): Debian's Open MPI relocated there (binaries and libraries
  copied, the MCA components and help files linked), and this machine's own copy hidden (its ``orted``, ``orterun``
  and libraries replaced by files that fail), so only the image's paths find MPI;
* the user ``mpiuser`` (UID 1000, home /home/mpiuser, /bin/bash, as the Dockerfile's useradd), its sshd_config at
  ``~/.sshd_config`` with host keys in ``~/.ssh_host``, the operator's key in ``~/.ssh``, the launcher's ssh_config
  in /etc/ssh/ssh_config.d/;
* the program and a library it needs in directories of the image's ``PATH`` and ``LD_LIBRARY_PATH`` that sshd's
  sessions do not get;
* the workers' hostnames (``<job>-worker-<i>.<job>.<ns>.svc``, the hostfile's) resolve to 127.0.0.2, 127.0.0.3...:
  addresses of no interface here, so Open MPI treats them as remote hosts and reaches them over ssh; each sshd
  listens on its own address at the image's port.

sshd builds each session's environment itself (its default PATH, the user's HOME and SHELL, no variable of its own
environment), exactly as in a worker pod.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.wait import patient

MPI_USER_UID = 1000
SYSTEM_LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
#: Debian's Open MPI (openmpi-bin, libopenmpi3): what this machine has, relocated under the image's prefix.
SYSTEM_BINARIES = {"mpirun": "/usr/bin/orterun", "orterun": "/usr/bin/orterun", "orted": "/usr/bin/orted"}
SYSTEM_LIBRARIES = ("libmpi.so.40", "libopen-rte.so.40", "libopen-pal.so.40")
SYSTEM_COMPONENTS = SYSTEM_LIBDIR / "openmpi" / "lib" / "openmpi3"
SYSTEM_HELP = Path("/usr/share/openmpi")
MISSING = "#!/bin/sh\necho \"$0: not in this image\" >&2\nexit 127\n"


def run(*argv: str) -> None:
    subprocess.run(argv, check=True)


def bind(source: Path, target: Path) -> None:
    run("mount", "--bind", str(source), str(target))


def lay_out_mpi(prefix: Path, work: Path) -> None:
    """Debian's Open MPI under ``prefix`` (the layout ``OPAL_PREFIX`` relocates it to: ``ompi_info --path all``),
    then this machine's copy hidden."""
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib").mkdir()
    for name, source in SYSTEM_BINARIES.items():
        shutil.copy2(source, prefix / "bin" / name)
    for soname in SYSTEM_LIBRARIES:
        shutil.copy2((SYSTEM_LIBDIR / soname).resolve(), prefix / "lib" / soname)
    components = prefix / "lib" / "x86_64-linux-gnu" / "openmpi" / "lib"
    components.mkdir(parents=True)
    (components / "openmpi3").symlink_to(SYSTEM_COMPONENTS)
    (prefix / "share").mkdir()
    (prefix / "share" / "openmpi").symlink_to(SYSTEM_HELP)
    missing = work / "missing"
    missing.write_text(MISSING)
    missing.chmod(0o755)
    empty = work / "empty.so"
    empty.write_bytes(b"")
    for source in sorted(set(SYSTEM_BINARIES.values())):
        bind(missing, Path(source))
    for soname in SYSTEM_LIBRARIES:
        bind(empty, (SYSTEM_LIBDIR / soname).resolve())


def fresh_dir(path: Path, work: Path) -> None:
    """``path`` as an empty folder of this namespace (a folder of the host is covered, not changed)."""
    if str(path).startswith("/opt/"):
        path.mkdir(parents=True, exist_ok=True)
        return
    assert path.is_dir(), f"{path}: give the program a folder under /opt or one that exists here"
    cover = work / ("cover" + str(path).replace("/", "_"))
    cover.mkdir()
    bind(cover, path)


def accounts(work: Path) -> None:
    """/etc/passwd and /etc/group with the image's mpiuser (UID/GID 1000) instead of this machine's UID 1000."""
    for name, line in (
        ("passwd", f"mpiuser:x:{MPI_USER_UID}:{MPI_USER_UID}::/home/mpiuser:/bin/bash"),
        ("group", f"mpiuser:x:{MPI_USER_UID}:"),
    ):
        kept = [
            entry for entry in Path(f"/etc/{name}").read_text().splitlines() if entry.split(":")[2] != str(MPI_USER_UID)
        ]
        copy = work / name
        copy.write_text("\n".join([*kept, line]) + "\n")
        bind(copy, Path(f"/etc/{name}"))


def hosts_file(work: Path, workers: list[dict[str, str]]) -> None:
    copy = work / "hosts"
    copy.write_text(Path("/etc/hosts").read_text() + "".join(f"{w['addr']} {w['host']}\n" for w in workers))
    bind(copy, Path("/etc/hosts"))


def pod(name: str, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A pod's process: its own mount and UTS namespaces (a private /tmp, hostname ``name``), run as mpiuser with
    exactly ``env``."""
    inner = ["setpriv", f"--reuid={MPI_USER_UID}", f"--regid={MPI_USER_UID}", "--clear-groups", "--", *argv]
    script = 'mount -t tmpfs -o mode=1777 tmpfs /tmp && hostname "$0" && exec "$@"'
    out = log.open("wb")
    return subprocess.Popen(
        ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script, name, *inner],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        cwd="/home/mpiuser",
        start_new_session=True,
    )


def wait_listening(addr: str, port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd on {addr} exited {proc.returncode}")
        try:
            with socket.create_connection((addr, port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"sshd on {addr}:{port} did not listen")


def early_pod(spec: dict[str, Any], work: Path) -> subprocess.Popen[bytes] | None:
    """What starts before the workers: the launcher (``launcher_with_workers``), else its init container
    (``launcher_init``, with the launcher's hostname and a bare environment), else nothing."""
    if spec.get("launcher_with_workers"):
        return pod(spec["launcher_hostname"], spec["launcher_command"], spec["launcher_env"], work / "launcher.log")
    if spec.get("launcher_init"):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
        return pod(spec["launcher_hostname"], spec["launcher_init"], env, work / "init.log")
    return None


def main(spec_path: str) -> int:
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    work = Path(spec["work"])
    run("mount", "-t", "tmpfs", "tmpfs", "/opt")
    lay_out_mpi(Path(spec["prefix"]), work)
    for folder, files in spec["files"].items():
        fresh_dir(Path(folder), work)
        for name, source in files.items():
            shutil.copy2(source, Path(folder) / name)
    run("mount", "-t", "tmpfs", "tmpfs", "/home")
    Path("/home/mpiuser").mkdir()
    bind(Path(spec["home"]), Path("/home/mpiuser"))
    bind(Path(spec["ssh_config_d"]), Path("/etc/ssh/ssh_config.d"))
    accounts(work)
    hosts_file(work, spec["workers"])

    workers = []
    early: subprocess.Popen[bytes] | None = None
    init_code: int | None = None
    workers_at = 0.0
    try:
        # before the workers start: the launcher's init container, or (spec["launcher_with_workers"]) the launcher
        # itself, as MPI Operator v0.8.0 starts a queued job's launcher with its workers
        init = early_pod(spec, work)
        if init is not None and spec.get("launcher_with_workers"):
            early = init
        time.sleep(spec.get("worker_delay_s", 0))
        workers_at = time.time()
        for w in spec["workers"]:
            argv = [*spec["worker_command"], "-o", f"ListenAddress={w['addr']}"]
            workers.append(pod(w["hostname"], argv, spec["worker_env"], work / f"{w['hostname']}.log"))
        deadline = time.monotonic() + patient(30)
        for w, proc in zip(spec["workers"], workers):
            wait_listening(w["addr"], spec["port"], proc, deadline)
        if init is not None and early is None:
            init_code = init.wait(timeout=spec["timeout"])
        launcher = early or pod(
            spec["launcher_hostname"], spec["launcher_command"], spec["launcher_env"], work / "launcher.log"
        )
        try:
            code = launcher.wait(timeout=spec["timeout"])
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            code = -9
    finally:
        for proc in workers:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in workers:
            try:
                proc.wait(timeout=patient(10))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    print(
        json.dumps(
            {
                "code": code,
                "launcher": (work / "launcher.log").read_text(errors="replace"),
                "init_code": init_code,
                "init": (work / "init.log").read_text(errors="replace") if (work / "init.log").exists() else "",
                "workers_at": workers_at,
                "workers": {
                    w["hostname"]: (work / f"{w['hostname']}.log").read_text(errors="replace") for w in spec["workers"]
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
