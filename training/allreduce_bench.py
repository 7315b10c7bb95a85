"""All-reduce bandwidth health check, run across the training nodes before training.

Launched like ``train.py`` (one ``torchrun`` per node, any rendezvous; a plain ``python`` process is a group of one)
or by ``mpirun`` (an MPIJob: ranks from ``OMPI_COMM_WORLD_*``, rank 0 at ``MASTER_ADDR``:``MASTER_PORT``;
``--nccl-tests-table`` prints ``all_reduce_perf``'s table). For every power-of-two size it checks the result, then
times ``--iters`` in-place all-reduces (the slowest rank's time) and reports nccl-tests' ``algbw`` and ``busbw``.
Rank 0 prints one JSON object a line (``allreduce_result`` per size, then ``allreduce_summary``, also written to
``--output-json``). Exit codes of every worker (all ranks agree, except on 1): 0 results correct and busbw at the
largest size reaches ``--min-busbw-gbps``; 1 ``--output-json`` or ``--metrics-json`` not written, or an unexpected error
(a collective timed out); 2 bad command line, or ``mpirun`` without ``MASTER_ADDR``/``MASTER_PORT``; 3 busbw below
``--min-busbw-gbps`` (always with one process); 4 a wrong result (before 3 and 5); 5 a world size other than
``--expect-world-size``; 6 ``--require-efa`` found no usable EFA (checked before measuring).

The command lines, the method and its choices: "The all-reduce check" in docs/explanation/programs.md."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
import torch.distributed as dist

MIB = 1 << 20
GIB = 1 << 30
DEFAULT_MIN_BYTES = MIB
DEFAULT_MAX_BYTES_GPU = GIB
DEFAULT_MAX_BYTES_CPU = 64 * MIB
FLOAT32_BYTES = 4
PATTERN_PERIOD = 256
GB = 1e9

#: What OpenMPI's mpirun sets for every rank it starts.
OMPI_RANK = "OMPI_COMM_WORLD_RANK"
OMPI_SIZE = "OMPI_COMM_WORLD_SIZE"
OMPI_LOCAL_RANK = "OMPI_COMM_WORLD_LOCAL_RANK"
OMPI_LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_SIZE"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BELOW_THRESHOLD = 3
EXIT_WRONG_RESULT = 4
EXIT_WORLD_SIZE = 5
EXIT_NO_EFA = 6
EXIT_REPORT_ERROR = 1


# --------------------------------------------------------------------------- #
# Pure helpers (unit tested)
# --------------------------------------------------------------------------- #
def allreduce_bus_factor(world_size: int) -> float:
    """nccl-tests' all_reduce bus-bandwidth factor ``2(n-1)/n`` (0 for one rank)."""
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    return 2.0 * (world_size - 1) / world_size


def allreduce_bandwidth_gbps(size_bytes: int, seconds_per_op: float, world_size: int) -> tuple[float, float]:
    """Return ``(algbw, busbw)`` in GB/s (1e9 bytes) for one all-reduce of ``size_bytes``.

    ``algbw = size_bytes / seconds_per_op`` and ``busbw = algbw * 2(n-1)/n``,
    exactly as nccl-tests defines them for all_reduce.
    """
    if size_bytes < 0:
        raise ValueError(f"size must be >= 0 bytes, got {size_bytes}")
    if not seconds_per_op > 0.0 or not math.isfinite(seconds_per_op):
        raise ValueError(f"time per operation must be a positive finite number, got {seconds_per_op}")
    algbw = size_bytes / seconds_per_op / GB
    return algbw, algbw * allreduce_bus_factor(world_size)


def is_power_of_two(value: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return value > 0 and value & (value - 1) == 0


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from ``min_bytes`` to ``max_bytes`` inclusive (both must be powers of two >= 4)."""
    for name, value in (("min", min_bytes), ("max", max_bytes)):
        if not is_power_of_two(value) or value < FLOAT32_BYTES:
            raise ValueError(f"--{name}-bytes must be a power of two >= {FLOAT32_BYTES}, got {value}")
    if min_bytes > max_bytes:
        raise ValueError(f"--min-bytes ({min_bytes}) is larger than --max-bytes ({max_bytes})")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def pattern_row(numel: int, device: torch.device) -> torch.Tensor:
    """``i mod P`` for one period ``P = min(256, numel)`` (P divides ``numel`` for powers of two)."""
    period = min(PATTERN_PERIOD, numel)
    return torch.arange(period, dtype=torch.float32, device=device)


def fill_check_pattern(buffer: torch.Tensor, rank: int) -> None:
    """Fill ``buffer`` (float32, power-of-two length) with ``rank + 1 + (i mod 256)``."""
    row = pattern_row(buffer.numel(), buffer.device)
    buffer.view(-1, row.numel()).copy_((row + float(rank + 1)).expand(buffer.numel() // row.numel(), -1))


def count_wrong_elements(result: torch.Tensor, world_size: int) -> int:
    """Number of elements of an all-reduced check buffer that differ from the exact sum.

    Rank ``r`` contributed ``r + 1 + (i mod 256)``, so element ``i`` must be
    ``n(n+1)/2 + n*(i mod 256)``; these are integers below 2**24 for any
    realistic ``n`` and therefore exact in float32 whatever the summation order.
    """
    row = pattern_row(result.numel(), result.device)
    expected = row * float(world_size) + float(world_size * (world_size + 1) // 2)
    matches = torch.eq(result.view(-1, row.numel()), expected)
    return int(result.numel() - int(matches.sum().item()))


def decide_outcome(
    correct: bool,
    world_size: int,
    busbw_at_max_size: float,
    threshold_gbps: float | None,
    expected_world_size: int | None,
) -> tuple[int, str]:
    """Exit code and a human-readable reason for the whole check."""
    if not correct:
        return EXIT_WRONG_RESULT, "an all-reduce returned a wrong result"
    if expected_world_size is not None and world_size != expected_world_size:
        return EXIT_WORLD_SIZE, f"world size {world_size} differs from --expect-world-size {expected_world_size}"
    if threshold_gbps is None:
        return EXIT_OK, "results correct; no bandwidth threshold set"
    if world_size == 1:
        return (
            EXIT_BELOW_THRESHOLD,
            (f"only one process: bus bandwidth is 0 by definition, below the threshold {threshold_gbps:g} GB/s"),
        )
    if busbw_at_max_size < threshold_gbps:
        return (
            EXIT_BELOW_THRESHOLD,
            (
                f"bus bandwidth at the largest size {busbw_at_max_size:.4f} GB/s is below the "
                f"threshold {threshold_gbps:g} GB/s"
            ),
        )
    return (
        EXIT_OK,
        (f"bus bandwidth at the largest size {busbw_at_max_size:.4f} GB/s meets the threshold {threshold_gbps:g} GB/s"),
    )


def efa_problems(
    expected_interfaces: int, dev_dir: Path = Path("/dev/infiniband"), library_path: str | None = None
) -> list[str]:
    """Why NCCL on this node would not use EFA (empty when it can): the EFA devices the device plugin
    passes into the pod (``uverbs*``, one per interface) and the aws-ofi-nccl plugin
    (``libnccl-net*.so``) on the library path. Without either, NCCL silently falls back to TCP."""
    problems: list[str] = []
    devices = sorted(p.name for p in dev_dir.glob("uverbs*")) if dev_dir.is_dir() else []
    if len(devices) < expected_interfaces:
        problems.append(
            f"{len(devices)} EFA device(s) in {dev_dir}, expected {expected_interfaces} "
            "(is vpc.amazonaws.com/efa requested and the EFA device plugin running?)"
        )
    dirs = [
        Path(d)
        for d in (library_path if library_path is not None else os.environ.get("LD_LIBRARY_PATH", "")).split(":")
        if d
    ]
    candidates = [d for d in dirs if d.is_dir()] + [
        sub for d in dirs if d.is_dir() for sub in d.iterdir() if sub.is_dir()
    ]
    if not any(any(d.glob("libnccl-net*.so*")) for d in candidates):
        problems.append(
            "no aws-ofi-nccl plugin (libnccl-net*.so) on LD_LIBRARY_PATH: the image lacks the EFA installer"
        )
    return problems


@dataclass(frozen=True)
class ProcessLayout:
    """Where this process sits, as its launcher says: ``torchrun`` (``RANK``/``WORLD_SIZE``), ``mpirun``
    (``OMPI_COMM_WORLD_*``) or ``single`` (neither: a one-process group)."""

    launcher: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nodes: int


def process_layout(environ: Mapping[str, str]) -> ProcessLayout:
    """The layout from the environment; ``ValueError`` when ``mpirun`` started this process without the
    ``MASTER_ADDR``/``MASTER_PORT`` the ranks meet at."""
    if "WORLD_SIZE" in environ:
        local_size = int(environ.get("LOCAL_WORLD_SIZE", "1"))
        return ProcessLayout(
            "torchrun",
            int(environ.get("RANK", "0")),
            int(environ["WORLD_SIZE"]),
            int(environ.get("LOCAL_RANK", "0")),
            local_size,
            int(environ.get("GROUP_WORLD_SIZE", "1")),
        )
    if OMPI_SIZE in environ:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(name)]
        if missing:
            raise ValueError(
                f"started by mpirun without {' and '.join(missing)}: forward the address of rank 0's host "
                "(mpirun -x MASTER_ADDR -x MASTER_PORT; the MPIJob does)"
            )
        size, local_size = int(environ[OMPI_SIZE]), int(environ.get(OMPI_LOCAL_SIZE, "1"))
        return ProcessLayout(
            "mpirun",
            int(environ[OMPI_RANK]),
            size,
            int(environ.get(OMPI_LOCAL_RANK, "0")),
            local_size,
            max(1, size // max(1, local_size)),
        )
    return ProcessLayout("single", 0, 1, 0, 1, 1)


def nccl_tests_table(results: Sequence[SizeResult], world_size: int) -> list[str]:
    """The results as nccl-tests' ``all_reduce_perf`` prints its table: a header naming the columns (size, count,
    type, redop, root, then time in microseconds, algbw, busbw in GB/s and #wrong for the out-of-place and the
    in-place operation), one row per size, and the average bus bandwidth. Only the in-place all-reduce is
    measured: the out-of-place columns are ``N/A``."""
    lines = [
        f"# allreduce_bench.py: all_reduce, float32, sum, {world_size} ranks; in place only (out-of-place: N/A)",
        f"#{'':>60}out-of-place{'':>26}in-place",
        f"#{'size':>11} {'count':>12} {'type':>6} {'redop':>6} {'root':>6} "
        f"{'time':>9} {'algbw':>9} {'busbw':>9} {'#wrong':>6} {'time':>9} {'algbw':>9} {'busbw':>9} {'#wrong':>6}",
        f"#{'(B)':>11} {'(elements)':>12} {'':>6} {'':>6} {'':>6} "
        f"{'(us)':>9} {'(GB/s)':>9} {'(GB/s)':>9} {'':>6} {'(us)':>9} {'(GB/s)':>9} {'(GB/s)':>9} {'':>6}",
    ]
    for r in results:
        lines.append(
            f" {r.size_bytes:>11} {r.count:>12} {'float':>6} {'sum':>6} {-1:>6} "
            f"{'N/A':>9} {'N/A':>9} {'N/A':>9} {'N/A':>6} "
            f"{r.time_us:>9.1f} {r.algbw_gbps:>9.4f} {r.busbw_gbps:>9.4f} {r.wrong_elements:>6}"
        )
    average = sum(r.busbw_gbps for r in results) / len(results) if results else 0.0
    lines.append(f"# Avg bus bandwidth    : {average:.4f}")
    return lines


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically: temp file in the same folder, fsync, ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; other pods/users read the report
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable (best effort)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #
def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0.0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--min-bytes",
        type=_positive_int,
        default=DEFAULT_MIN_BYTES,
        help="smallest message size in bytes, a power of two (default 1 MiB)",
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=None,
        help="largest message size in bytes, a power of two (default 1 GiB on GPU, 64 MiB on CPU)",
    )
    parser.add_argument("--warmup", type=_non_negative_int, default=5, help="untimed all-reduces per size (default 5)")
    parser.add_argument("--iters", type=_positive_int, default=20, help="timed all-reduces per size (default 20)")
    parser.add_argument(
        "--min-busbw-gbps",
        type=_positive_float,
        default=None,
        help="fail (exit 3) when busbw at the largest size is below this many GB/s",
    )
    parser.add_argument(
        "--require-efa",
        type=_positive_int,
        default=None,
        metavar="INTERFACES",
        help="fail (exit 6) unless every node has this many EFA devices and the "
        "aws-ofi-nccl plugin, so a check over TCP cannot pass as an EFA check",
    )
    parser.add_argument(
        "--expect-world-size",
        type=_positive_int,
        default=None,
        help="fail (exit 5) unless exactly this many processes joined",
    )
    parser.add_argument(
        "--output-json", type=Path, default=None, help="also write the summary here (atomically, rank 0)"
    )
    parser.add_argument(
        "--metrics-json",
        type=Path,
        default=None,
        help="also write the bus bandwidth as the project's metrics.json (metrics.py: "
        "busbw_gbps at the largest size, wall time, world size), rank 0",
    )
    parser.add_argument(
        "--timeout-seconds",
        type=_positive_float,
        default=600.0,
        help="process-group timeout for init and every collective (default 600)",
    )
    parser.add_argument(
        "--nccl-tests-table",
        action="store_true",
        help="also print the results as nccl-tests' all_reduce_perf table (rank 0, stdout), "
        "for nccl_report.py and other readers of all_reduce_perf output",
    )
    args = parser.parse_args(argv)
    if args.max_bytes is None:
        args.max_bytes = DEFAULT_MAX_BYTES_GPU if torch.cuda.is_available() else DEFAULT_MAX_BYTES_CPU
    try:
        args.sizes = message_sizes(args.min_bytes, args.max_bytes)
    except ValueError as exc:
        parser.error(str(exc))
    return args


# --------------------------------------------------------------------------- #
# Distributed plumbing
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class BenchContext:
    """Where this process sits in the job."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str
    layout: ProcessLayout = ProcessLayout("single", 0, 1, 0, 1, 1)
    """What the launcher said (``launcher``, processes per node, nodes)."""

    @property
    def is_main(self) -> bool:
        """True on global rank 0."""
        return self.rank == 0

    def synchronize(self) -> None:
        """Wait for all queued GPU work of this process (no-op on CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def setup_distributed(timeout_seconds: float, layout: ProcessLayout) -> BenchContext:
    """Initialise the process group for ``layout`` (:func:`process_layout`).

    NCCL on ``cuda:LOCAL_RANK`` when CUDA is available, gloo on CPU otherwise.
    Under torchrun and mpirun the ranks meet through ``env://`` (under mpirun
    with the rank and size OpenMPI gave); a single process (plain ``python``)
    gets a one-process group on an in-memory store, so that the same code path runs.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import dist_context  # noqa: PLC0415  (beside this script, in the image's /app)

    local_rank = layout.local_rank
    device, backend = dist_context.local_device(local_rank)
    timeout = dt.timedelta(seconds=timeout_seconds)
    device_id = device if device.type == "cuda" else None
    if layout.launcher == "torchrun":
        dist.init_process_group(backend=backend, init_method="env://", timeout=timeout, device_id=device_id)
    elif layout.launcher == "mpirun":
        dist.init_process_group(
            backend=backend,
            init_method="env://",
            rank=layout.rank,
            world_size=layout.world_size,
            timeout=timeout,
            device_id=device_id,
        )
    else:
        store = dist.HashStore()
        dist.init_process_group(
            backend=backend, store=store, rank=0, world_size=1, timeout=timeout, device_id=device_id
        )
    return BenchContext(dist.get_rank(), dist.get_world_size(), local_rank, device, backend, layout)


def emit(ctx: BenchContext, record: dict[str, Any]) -> None:
    """Print one JSON line on rank 0 (flushed, so ``kubectl logs`` shows it at once)."""
    if ctx.is_main:
        print(json.dumps(record), flush=True)


def reduce_scalars(ctx: BenchContext, values: list[float], op: dist.ReduceOp.RedOpType) -> list[float]:
    """All-reduce a few float64 scalars with ``op`` and return them on every rank."""
    tensor = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    dist.all_reduce(tensor, op=op)
    return [float(v) for v in tensor.tolist()]


# --------------------------------------------------------------------------- #
# Measurement
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class SizeResult:
    """Measurement for one message size (all ranks hold the same values)."""

    size_bytes: int
    count: int
    time_us: float
    time_us_min_rank: float
    algbw_gbps: float
    busbw_gbps: float
    wrong_elements: int

    @property
    def correct(self) -> bool:
        """True when every element on every rank had the exact expected value."""
        return self.wrong_elements == 0

    def fields(self) -> dict[str, Any]:
        """Per-size values (times in microseconds, bandwidths in GB/s, rounded for reading)."""
        return {
            "size_bytes": self.size_bytes,
            "count": self.count,
            "time_us": round(self.time_us, 3),
            "time_us_min_rank": round(self.time_us_min_rank, 3),
            "algbw_gbps": round(self.algbw_gbps, 4),
            "busbw_gbps": round(self.busbw_gbps, 4),
            "wrong_elements": self.wrong_elements,
            "correct": self.correct,
        }

    def record(self, ctx: BenchContext, args: argparse.Namespace) -> dict[str, Any]:
        """The JSON line printed for this size."""
        return {
            "event": "allreduce_result",
            "world_size": ctx.world_size,
            "dtype": "float32",
            "op": "sum",
            "warmup": args.warmup,
            "iters": args.iters,
            **self.fields(),
        }


def check_size(ctx: BenchContext, buffer: torch.Tensor) -> int:
    """All-reduce the check pattern once; return the number of wrong elements summed over ranks."""
    fill_check_pattern(buffer, ctx.rank)
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    wrong = count_wrong_elements(buffer, ctx.world_size)
    if wrong:
        print(
            f"allreduce_bench: rank {ctx.rank}: {wrong} of {buffer.numel()} elements wrong after an "
            f"all-reduce of {buffer.numel() * FLOAT32_BYTES} bytes",
            file=sys.stderr,
            flush=True,
        )
    return int(reduce_scalars(ctx, [float(wrong)], dist.ReduceOp.SUM)[0])


def time_size(ctx: BenchContext, buffer: torch.Tensor, warmup: int, iters: int) -> tuple[float, float]:
    """Seconds per all-reduce of ``buffer``: ``(max over ranks, min over ranks)``."""
    buffer.zero_()  # stays 0 under repeated sums: no overflow or denormals while timing
    for _ in range(warmup):
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    ctx.synchronize()
    dist.barrier()
    ctx.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    ctx.synchronize()
    per_op = (time.perf_counter() - start) / iters
    slowest, negated_fastest = reduce_scalars(ctx, [per_op, -per_op], dist.ReduceOp.MAX)
    return slowest, -negated_fastest


def measure(ctx: BenchContext, args: argparse.Namespace) -> list[SizeResult]:
    """Check and time every message size, printing one JSON line per size on rank 0."""
    storage = torch.empty(max(args.sizes) // FLOAT32_BYTES, dtype=torch.float32, device=ctx.device)
    results = []
    for size in args.sizes:
        buffer = storage[: size // FLOAT32_BYTES]
        wrong = check_size(ctx, buffer)
        slowest, fastest = time_size(ctx, buffer, args.warmup, args.iters)
        algbw, busbw = allreduce_bandwidth_gbps(size, slowest, ctx.world_size)
        result = SizeResult(size, buffer.numel(), slowest * 1e6, fastest * 1e6, algbw, busbw, wrong)
        emit(ctx, result.record(ctx, args))
        results.append(result)
    del storage
    return results


def gather_hosts(ctx: BenchContext) -> list[str]:
    """Sorted distinct host names of all ranks (pod names on Kubernetes)."""
    hosts: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(hosts, socket.gethostname())
    return sorted({str(host) for host in hosts})


def build_summary(
    ctx: BenchContext, args: argparse.Namespace, results: list[SizeResult], hosts: list[str]
) -> dict[str, Any]:
    """The ``allreduce_summary`` record, including the verdict and exit code."""
    correct = all(r.correct for r in results)
    largest = max(results, key=lambda r: r.size_bytes)
    exit_code, reason = decide_outcome(
        correct, ctx.world_size, largest.busbw_gbps, args.min_busbw_gbps, args.expect_world_size
    )
    return {
        "event": "allreduce_summary",
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "max_busbw_gbps": round(max(r.busbw_gbps for r in results), 4),
        "busbw_at_max_size_gbps": round(largest.busbw_gbps, 4),
        "algbw_at_max_size_gbps": round(largest.algbw_gbps, 4),
        "avg_busbw_gbps": round(sum(r.busbw_gbps for r in results) / len(results), 4),
        "max_size_bytes": largest.size_bytes,
        "dtype": "float32",
        "op": "sum",
        "warmup": args.warmup,
        "iters": args.iters,
        "sizes": [r.fields() for r in results],
        "threshold_gbps": args.min_busbw_gbps,
        "expected_world_size": args.expect_world_size,
        "correct": correct,
        "passed": exit_code == EXIT_OK,
        "exit_code": exit_code,
        "reason": reason,
        "launcher": ctx.layout.launcher,
        "agents": ctx.layout.nodes,
        "hosts": hosts,
        "local_world_size": ctx.layout.local_world_size,
        "restart_count": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        "device": ctx.device.type,
        "torch_version": torch.__version__,
        "nccl_version": _nccl_version() if ctx.backend == "nccl" else None,
        "time": round(time.time(), 3),
    }


def write_bandwidth_metrics(path: Path, summary: dict[str, Any], wall_time_s: float) -> Path:
    """The summary as the project's ``metrics.json`` (``metrics.py``): the bus bandwidth at the largest size."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import metrics  # noqa: PLC0415  (beside this script, in the image's /app)

    return metrics.write_metrics(
        path,
        "allreduce_bench.py",
        wall_time_s=round(wall_time_s, 3),
        busbw_gbps=summary["busbw_at_max_size_gbps"],
        world_size=summary["world_size"],
        max_size_bytes=summary["max_size_bytes"],
        avg_busbw_gbps=summary["avg_busbw_gbps"],
        backend=summary["backend"],
        passed=summary["passed"],
    )


def _nccl_version() -> str | None:
    """NCCL version bundled with torch, as ``major.minor.patch`` (None when unknown)."""
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    if isinstance(version, tuple):
        return ".".join(str(part) for part in version)
    return str(version)


def run(ctx: BenchContext, args: argparse.Namespace) -> int:
    """Measure, report and return this process's exit code (the same on every rank)."""
    emit(
        ctx,
        {
            "event": "allreduce_start",
            "world_size": ctx.world_size,
            "backend": ctx.backend,
            "sizes_bytes": args.sizes,
            "warmup": args.warmup,
            "iters": args.iters,
            "threshold_gbps": args.min_busbw_gbps,
            "time": round(time.time(), 3),
        },
    )
    if args.require_efa is not None:
        local = efa_problems(args.require_efa)
        gathered: list[Any] = [None] * ctx.world_size
        dist.all_gather_object(gathered, [f"{socket.gethostname()}: {p}" for p in local])
        problems = sorted({p for rank_problems in gathered for p in rank_problems})
        if problems:
            summary: dict[str, Any] = {
                "event": "allreduce_summary",
                "world_size": ctx.world_size,
                "backend": ctx.backend,
                "passed": False,
                "exit_code": EXIT_NO_EFA,
                "reason": "EFA is not usable: " + "; ".join(problems),
                "time": round(time.time(), 3),
            }
            if ctx.is_main:
                emit(ctx, summary)
                print(f"allreduce_bench: FAILED (exit {EXIT_NO_EFA}): {summary['reason']}", file=sys.stderr, flush=True)
                if args.output_json is not None:
                    try:
                        write_json_atomic(args.output_json, summary)
                    except OSError as exc:
                        print(f"allreduce_bench: cannot write --output-json: {exc}", file=sys.stderr, flush=True)
            dist.barrier()
            return EXIT_NO_EFA
    started = time.time()
    results = measure(ctx, args)
    hosts = gather_hosts(ctx)
    summary = build_summary(ctx, args, results, hosts)
    exit_code = int(summary["exit_code"])
    if ctx.is_main:
        if args.nccl_tests_table:
            print("\n".join(nccl_tests_table(results, ctx.world_size)), flush=True)
        emit(ctx, summary)
        verdict = "PASSED" if summary["passed"] else "FAILED"
        print(f"allreduce_bench: {verdict} (exit {exit_code}): {summary['reason']}", file=sys.stderr, flush=True)
        if args.output_json is not None:
            try:
                write_json_atomic(args.output_json, summary)
            except OSError as exc:  # still reach the barrier below, so no other rank hangs
                print(
                    f"allreduce_bench: cannot write --output-json {args.output_json}: {exc}",
                    file=sys.stderr,
                    flush=True,
                )
                exit_code = EXIT_REPORT_ERROR
        if args.metrics_json is not None:
            try:
                write_bandwidth_metrics(args.metrics_json, summary, time.time() - started)
            except OSError as exc:
                print(
                    f"allreduce_bench: cannot write --metrics-json {args.metrics_json}: {exc}",
                    file=sys.stderr,
                    flush=True,
                )
                exit_code = EXIT_REPORT_ERROR
    # Keep every rank alive until rank 0 has written its report, so that torchrun does not
    # tear rank 0 down when another rank exits with a failure code first.
    dist.barrier()
    return exit_code


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        layout = process_layout(os.environ)
    except ValueError as exc:
        print(f"allreduce_bench: error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    ctx = setup_distributed(args.timeout_seconds, layout)
    try:
        return run(ctx, args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import process_end  # noqa: E402  (beside this script, in the image's /app)

    process_end.end_process(main())
