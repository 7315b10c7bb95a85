"""The toolbox image's programs run with a read-only root file system, as the pods run them: staging, torchrun
training through the launcher (etcd-v2 rendezvous against an etcd that is itself read-only but for its data
folder), the evaluation and the all-reduce check, in a mount namespace (``unshare``)
whose every file system is read-only except ``/tmp`` (a fresh tmpfs, the pods' ``emptyDir``, also ``HOME``),
``/dev/shm`` (the pods' memory-backed volume) and the shared volume (a folder on ``/dev/shm`` here). A
program that writes anywhere else (``__pycache__``, a cache under the image, a log file) fails."""

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from components.workloads.pytorch import LAUNCHER, torch_env
from components.workloads.spec import torchrun_command, worker_env
from stacks.ports import free_port
from tests import training_support as ts
from tests.wait import patient

TINY_RECIPE = [*ts.TINY_RECIPE, "--workers", "1"]
APP = ts.TRAINING_DIR
REPO_ROOT = ts.REPO_ROOT


def _unshare_works(scratch: Path) -> bool:
    """Whether this machine lets an unprivileged user remount the root file system read-only in a namespace."""
    probe = scratch / "probe"
    try:
        done = subprocess.run(
            ["unshare", "-rm", "sh", "-c", f"mount -o remount,bind,ro / && ! touch {probe} 2>/dev/null"],
            capture_output=True,
            timeout=patient(30),
        )
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and not probe.exists()


@pytest.fixture()
def shared() -> Iterator[Path]:
    """The shared volume: a folder on /dev/shm (a separate mount that stays writable)."""
    path = Path("/dev/shm") / f"eks-training-ro-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_toolbox_programs_run_with_a_read_only_root(shared: Path, tmp_path: Path) -> None:
    if not _unshare_works(tmp_path):
        pytest.skip("unprivileged user and mount namespaces (unshare -rm) are not available on this machine")
    digits = ts.make_digits_cifar(tmp_path / "digits")
    md5, size = ts.make_tarball(digits, shared / "digits.tar.gz")
    data_dir, run = shared / "datasets" / "cifar10", shared / "runs" / "ro"
    placement = {"threads_per_proc": 1, "gpus": 0}
    env = {
        "PATH": f"{ts.VENV_BIN}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",  # as the toolbox image (training/Dockerfile) sets it
        **worker_env(placement, torch_env(0)),  # type: ignore[arg-type]
    }
    assert env["HOME"] == "/tmp"
    py = sys.executable
    client, peer = f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    # etcd as EtcdRendezvous runs it; its data folder is an emptyDir there, a folder of the tmpfs here
    etcd = [
        str(ts.etcd_binary()),
        "--name=rendezvous",
        "--data-dir=/tmp/etcd",
        "--enable-v2=true",
        f"--listen-client-urls=http://{client}",
        f"--advertise-client-urls=http://{client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=rendezvous={peer}",
        "--initial-cluster-state=new",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=1073741824",
    ]
    wait_etcd = [
        py,
        "-c",
        "import time, urllib.request\n"
        "for _ in range(300):\n"
        "    try:\n"
        f"        urllib.request.urlopen('http://{client}/health', timeout=1).read(); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "else: raise SystemExit('etcd did not start')",
    ]
    torchrun = torchrun_command(
        min_nodes=1,
        max_nodes=1,
        procs_per_node=2,
        backend="etcd-v2",
        endpoint=client,
        rdzv_id="ro",
        max_restarts=0,
        script=str(APP / "train.py"),
        script_args=["--data-dir", str(data_dir), "--output-dir", str(run), "--epochs", "1", *TINY_RECIPE],
    )
    torchrun[0] = str(ts.VENV_BIN / "torchrun")
    bench = torchrun_command(
        min_nodes=1,
        max_nodes=1,
        procs_per_node=2,
        backend="c10d",
        endpoint=f"127.0.0.1:{free_port()}",
        rdzv_id="ro-bench",
        max_restarts=0,
        script=str(APP / "allreduce_bench.py"),
        script_args=[
            "--max-bytes",
            str(1 << 20),
            "--expect-world-size",
            "2",
            "--output-json",
            str(run / "allreduce.json"),
        ],
    )
    bench[0] = str(ts.VENV_BIN / "torchrun")
    launcher = [
        py,
        str(APP / LAUNCHER.rsplit("/", 1)[1]),
        "--output-dir",
        str(run),
        "--rdzv-backend",
        "etcd-v2",
        "--rdzv-endpoint",
        client,
        "--rdzv-id",
        "ro",
        "--",
        *torchrun,
    ]
    steps = [
        [
            py,
            str(APP / "stage_data.py"),
            "--source",
            f"file://{shared / 'digits.tar.gz'}",
            "--dest",
            str(data_dir),
            "--md5",
            md5,
            "--expected-bytes",
            str(size),
        ],
        launcher,
        [
            py,
            str(APP / "evaluate.py"),
            "--model",
            str(run / "model.pt"),
            "--data-dir",
            str(data_dir),
            "--output-json",
            str(run / "evaluation.json"),
            "--device",
            "cpu",
        ],
        bench,
    ]
    # What the programs need and a fresh tmpfs on /tmp would hide, when it lives below /tmp (a clone in /tmp): the
    # repository (the image's files, its venv and etcd), the interpreter. Each is bound aside before the tmpfs
    # and back, read-only, after it.
    needed = {REPO_ROOT, Path(sys.prefix), Path(sys.executable).resolve().parent.parent}
    hidden = sorted(p for p in needed if Path("/tmp") in p.parents)
    hidden = [p for p in hidden if not any(q in p.parents for q in hidden)]
    aside = [shared / f".aside-{i}" for i in range(len(hidden))]
    keep_before = [
        f"mkdir -p {_quote(str(a))} && mount --rbind {_quote(str(h))} {_quote(str(a))}" for h, a in zip(hidden, aside)
    ]
    keep_after = [
        f"mkdir -p {_quote(str(h))} && mount --rbind {_quote(str(a))} {_quote(str(h))} && "
        f"mount -o remount,bind,ro {_quote(str(h))}"
        for h, a in zip(hidden, aside)
    ]
    script = "\n".join(
        [
            "set -eu",
            "mount -o remount,bind,ro /",
            *keep_before,
            "mount -t tmpfs -o size=1g tmpfs /tmp",
            *keep_after,
            # controls: the image is read-only, the scratch folder and the shared volume are not
            f"if touch {APP}/.written 2>/dev/null; then echo 'root file system is writable' >&2; exit 90; fi",
            "touch /tmp/.written",
            f"touch {shared}/.written",
            " ".join(_quote(a) for a in etcd) + " >/tmp/etcd.log 2>&1 &",
            "ETCD_PID=$!",
            "trap 'kill $ETCD_PID 2>/dev/null; echo etcd log:; tail -20 /tmp/etcd.log' EXIT",
            *[" ".join(_quote(a) for a in step) for step in [wait_etcd, *steps]],
            "kill -0 $ETCD_PID",  # etcd is still up: it never needed to write outside its data folder
        ]
    )
    proc = subprocess.run(
        ["unshare", "-rm", "bash", "-c", script], env=env, capture_output=True, text=True, timeout=patient(600)
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-6000:]}"
    )
    assert not (APP / ".written").exists()
    assert (data_dir / ".cifar10-staged.json").is_file()
    assert (run / "DONE").is_file() and (run / "model.pt").is_file()
    assert json.loads((run / "evaluation.json").read_text())["accuracy"] > 0.1
    summary = json.loads((run / "allreduce.json").read_text())
    assert summary["world_size"] == 2 and summary["exit_code"] == 0


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"
