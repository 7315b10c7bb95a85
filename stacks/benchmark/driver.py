"""The sequencing of a benchmark run: ``up``, follow the experiments, wait for the collector, write the summary,
and ``destroy`` in a ``finally`` block unless the environment is kept.

Everything outside this process comes in through two small interfaces, so the sequencing is tested with fakes:
a :class:`StackLike` (what the Pulumi Automation API's ``Stack`` offers: ``up``, ``destroy``, ``outputs``) and a
:class:`ResultsStore` (read and write objects of the run's folder in S3). The progress is what the collector
writes to ``progress.json`` in S3 every poll, so the driver needs neither kubectl nor a Kubernetes client, and a
driver that is restarted, or another machine, can follow the same run.
"""

import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence, TextIO

from stacks.benchmark import layout, summary
from stacks.cli import EXIT_FAILED, EXIT_USAGE
from stacks.cli import EXIT_OK as EXIT_OK
from stacks.costs import estimate
from stacks.plan import Plan

# The exit statuses every command shares (stacks.cli), then the benchmark's own
EXIT_EXPERIMENT_FAILED = EXIT_FAILED
EXIT_CONFIG = EXIT_USAGE
EXIT_UP_FAILED = 3
#: Something the run needs on this machine is missing (the Pulumi CLI, the summary's matplotlib); nothing was created.
EXIT_MISSING_TOOL = 4
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


class StackLike(Protocol):
    """The part of ``pulumi.automation.Stack`` the driver uses."""

    def up(self, *, on_output: Optional[Callable[[str], Any]] = None) -> Any: ...

    def destroy(self, *, on_output: Optional[Callable[[str], Any]] = None) -> Any: ...

    def outputs(self) -> Mapping[str, Any]: ...


class ResultsStore(Protocol):
    """Objects of the run's folder (keys relative to ``s3://<bucket>/<prefix><run>/``)."""

    def get_json(self, rel: str) -> Optional[dict[str, Any]]:
        """The JSON object at ``rel``, ``None`` when it does not exist yet."""
        ...

    def put(self, rel: str, data: bytes, content_type: str) -> str:
        """Write ``data`` at ``rel``; returns its ``s3://`` URI."""
        ...


@dataclass(frozen=True)
class Target:
    """Where the run's results are, from the stack's ``benchmark`` output."""

    run: str
    bucket: str
    prefix: str
    """The run's folder in the bucket (``benchmarks/<run>/``)."""
    region: str
    experiments: tuple[str, ...]

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


class BenchmarkTimeout(Exception):
    """The collector did not finish within the driver's timeout."""


def output_value(value: Any) -> Any:
    """A stack output's value (the Automation API wraps each in an ``OutputValue`` with ``.value``)."""
    return getattr(value, "value", value)


def target_from_outputs(outputs: Mapping[str, Any]) -> Target:
    """The run's location from the stack outputs (``benchmark``: run, bucket, prefix, region, experiments)."""
    raw = output_value(outputs.get("benchmark"))
    if not isinstance(raw, Mapping):
        raise ValueError("the stack has no benchmark output: its config has no eks-training:benchmark section")
    return Target(
        run=str(raw["run"]),
        bucket=str(raw["bucket"]),
        prefix=str(raw["prefix"]),
        region=str(raw["region"]),
        experiments=tuple(raw["experiments"]),
    )


def _elapsed(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    s = int(seconds)
    return f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def render_progress(progress: Optional[Mapping[str, Any]], experiments: Sequence[str], waited_s: float) -> str:
    """The progress block: each experiment's phase, elapsed time (since Kubernetes started it) and pods."""
    if not progress:
        return f"[{_elapsed(waited_s)}] waiting for the collector's first report\n"
    states = progress.get("experiments") or {}
    collected = set(progress.get("collected") or [])
    width = max((len(e) for e in experiments), default=10)
    lines = [
        f"[{_elapsed(waited_s)}] {len(collected)}/{len(experiments)} collected (collector at "
        f"{progress.get('updatedAt')})"
    ]
    for name in experiments:
        s = states.get(name) or {}
        pods = ", ".join(f"{n} {p.lower()}" for p, n in sorted((s.get("pods") or {}).items()))
        mark = " (collected)" if name in collected else ""
        lines.append(
            f"  {name.ljust(width)}  {str(s.get('phase', 'Pending')).ljust(9)}  {_elapsed(s.get('elapsedSeconds'))}"
            f"  {pods or 'no pods yet'}{mark}"
        )
    return "\n".join(lines) + "\n"


@dataclass
class Options:
    """What the command line asked for."""

    stack: str
    keep: bool = False
    timeout_s: float = 25 * 3600.0
    poll_s: float = 30.0
    output_dir: Optional[Path] = None
    """A local folder for the summary (besides S3); ``None``: S3 only."""


@dataclass
class Outcome:
    """What a run did (for the caller and the tests)."""

    code: int = EXIT_OK
    target: Optional[Target] = None
    rows: list[summary.Row] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    destroyed: bool = False


def follow(
    store: ResultsStore,
    target: Target,
    opts: Options,
    out: TextIO,
    *,
    sleep: Optional[Callable[[float], None]] = None,
    clock: Optional[Callable[[], float]] = None,
) -> dict[str, Any]:
    """Show the progress until the collector's ``collector.json`` exists (returned); :class:`BenchmarkTimeout`
    after ``opts.timeout_s``. ``sleep`` and ``clock`` default to :func:`time.sleep` and :func:`time.monotonic`."""
    sleep = sleep or time.sleep
    clock = clock or time.monotonic
    start = clock()
    last = ""
    while True:
        done = store.get_json(layout.DONE_FILE)
        progress = store.get_json(layout.PROGRESS_FILE)
        block = render_progress(progress, target.experiments, clock() - start)
        if block.split("\n", 1)[-1] != last.split("\n", 1)[-1] or done is not None:
            out.write(block)
            out.flush()
            last = block
        if done is not None:
            return done
        if clock() - start >= opts.timeout_s:
            raise BenchmarkTimeout(f"the collector did not finish within {opts.timeout_s / 60:.0f} minutes")
        sleep(opts.poll_s)


def write_summary(
    store: ResultsStore, plan: Plan, target: Target, done: Mapping[str, Any], opts: Options, out: TextIO
) -> tuple[list[summary.Row], list[str]]:
    """The summary's rows and where it was written: S3 ``summary/`` and ``opts.output_dir``."""
    collected = done.get("experiments") or {}
    rows = []
    for job in plan.experiments:
        entry = collected.get(job.name) or {}
        metrics = entry.get("metrics") or store.get_json(layout.metrics_key(job.name))
        rows.append(summary.row(job, metrics, entry.get("status")))
    fixed = estimate(plan)
    about = {
        "run": target.run,
        "stack": opts.stack,
        "resultsUri": target.uri,
        "generatedAt": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environmentRunningUsdPerHour": fixed.running,
    }
    text = summary.table(rows)
    files = {
        "summary.txt": (text.encode(), "text/plain; charset=utf-8"),
        "summary.csv": (summary.to_csv(rows).encode(), "text/csv"),
        "summary.json": (summary.to_json(rows, **about).encode(), "application/json"),
        "summary.png": (summary.chart_png(rows, f"Benchmark {target.run} ({opts.stack})"), "image/png"),
    }
    written = []
    for name, (data, content_type) in files.items():
        written.append(store.put(f"{layout.SUMMARY_DIR}/{name}", data, content_type))
        if opts.output_dir is not None:
            opts.output_dir.mkdir(parents=True, exist_ok=True)
            (opts.output_dir / name).write_bytes(data)
            written.append(str(opts.output_dir / name))
    out.write("\n" + text)
    out.write(
        f"environment (control plane, NAT, system nodes, all groups at their desired size): "
        f"${fixed.running}/h while it runs\n"
    )
    return rows, written


def run(
    opts: Options,
    plan: Plan,
    open_stack: Callable[[], StackLike],
    open_store: Callable[[Target], ResultsStore],
    out: TextIO,
    *,
    sleep: Optional[Callable[[float], None]] = None,
    clock: Optional[Callable[[], float]] = None,
) -> Outcome:
    """up, follow, collect, summary; destroy in ``finally`` (unless kept), whatever happened before."""
    outcome = Outcome()
    keep = opts.keep or bool(plan.config.benchmark and plan.config.benchmark.keep.environment)
    stack = open_stack()
    try:
        out.write(f"pulumi up --stack {opts.stack}\n")
        out.flush()
        try:
            stack.up(on_output=lambda line: out.write(line + "\n"))
        except Exception as exc:  # noqa: BLE001 - CommandError and what the CLI raises: reported, then torn down
            out.write(f"pulumi up failed: {exc}\n")
            outcome.code = EXIT_UP_FAILED
            return outcome
        outputs = stack.outputs()
        if not isinstance(output_value(outputs.get("benchmark")), Mapping):  # config has the section: deferred
            out.write(
                "pulumi up made no collector: the experiments wait for their Capacity Block to start (pulumi up's "
                "warning names them); run the benchmark once the block has started\n"
            )
            outcome.code = EXIT_UP_FAILED
            return outcome
        target = target_from_outputs(outputs)
        outcome.target = target
        out.write(f"run {target.run}: results in {target.uri}\n")
        store = open_store(target)
        done = follow(store, target, opts, out, sleep=sleep, clock=clock)
        outcome.rows, outcome.written = write_summary(store, plan, target, done, opts, out)
        failed = [r.experiment for r in outcome.rows if r.status != "Succeeded"]
        if failed:
            out.write(
                f"not succeeded: {', '.join(failed)} (logs in "
                f"{target.uri}{layout.EXPERIMENTS_DIR}/<experiment>/output/logs/)\n"
            )
        outcome.code = EXIT_EXPERIMENT_FAILED if failed else EXIT_OK
        out.write(f"summary: {target.uri}{layout.SUMMARY_DIR}/\n")
    except BenchmarkTimeout as exc:
        out.write(f"timeout: {exc}; what was collected stays in S3\n")
        outcome.code = EXIT_TIMEOUT
    except KeyboardInterrupt:
        out.write("interrupted\n")
        outcome.code = EXIT_INTERRUPTED
    finally:
        if keep:
            out.write(f"keeping the environment (pulumi destroy --stack {opts.stack} removes it)\n")
        else:
            out.write(f"pulumi destroy --stack {opts.stack}\n")
            out.flush()
            try:
                stack.destroy(on_output=lambda line: out.write(line + "\n"))
                outcome.destroyed = True
            except Exception as exc:  # noqa: BLE001 - say what to run by hand, keep the first exit code
                out.write(f"pulumi destroy failed: {exc}; run `pulumi destroy --stack {opts.stack}`\n")
                if outcome.code == EXIT_OK:
                    outcome.code = EXIT_UP_FAILED
        out.flush()
    return outcome
