"""The summary of a benchmark run: one row per experiment (status, size, time, throughput, loss, accuracy, bus
bandwidth, goodput, time lost to failures, model FLOPs utilization, cost), as a terminal table, CSV, JSON and a PNG
chart comparing the experiments.

Cost is what the experiment's nodes cost for as long as Kubernetes ran it (``job_duration_s``: from the Job's start
to its end, scheduling and node start-up included) at the catalog's On-Demand prices (:func:`stacks.costs.job_hourly`);
the environment's fixed costs (control plane, NAT, system nodes) are shared by the run and shown once.
"""

import csv
import io
import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Optional, Sequence

from stacks.costs import job_hourly
from stacks.plan import JobPlan

#: The PNG's size in inches and its resolution.
CHART_DPI = 100


@dataclass(frozen=True)
class Row:
    """One experiment of the summary."""

    experiment: str
    kind: str
    status: str
    nodes: int
    processes_per_node: int
    instance_type: str
    wall_time_s: Optional[float]
    job_duration_s: Optional[float]
    throughput: Optional[float]
    throughput_unit: Optional[str]
    final_loss: Optional[float]
    final_accuracy: Optional[float]
    busbw_gbps: Optional[float]
    goodput: Optional[float]
    """Productive training time / wall time, as the launchers accounted it (training/goodput.py)."""
    lost_s: Optional[float]
    """Time lost to failures: restarts and recomputed steps."""
    mfu: Optional[float]
    """Model FLOPs utilization, when the program knew its FLOPs and the device's peak."""
    hourly_usd: Optional[float]
    cost_usd: Optional[float]


COLUMNS = [f.name for f in fields(Row)]


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def row(job: JobPlan, metrics: Optional[Mapping[str, Any]], status: Optional[str] = None) -> Row:
    """An experiment's row from its plan and its merged metrics (``None``: nothing collected)."""
    m = dict(metrics or {})
    hourly = job_hourly(job)
    duration = _number(m.get("job_duration_s"))
    wall = _number(m.get("wall_time_s"))
    billed = duration if duration is not None else wall
    cost = round(hourly * billed / 3600.0, 4) if hourly is not None and billed is not None else None
    return Row(
        experiment=job.name,
        kind=job.kind,
        status=str(m.get("status") or status or "NotCollected"),
        nodes=job.nodes,
        processes_per_node=job.procs_per_node,
        instance_type=job.group.profile.instance.name,
        wall_time_s=wall,
        job_duration_s=duration,
        throughput=_number(m.get("throughput")),
        throughput_unit=m.get("throughput_unit") if isinstance(m.get("throughput_unit"), str) else None,
        final_loss=_number(m.get("final_loss")),
        final_accuracy=_number(m.get("final_accuracy")),
        busbw_gbps=_number(m.get("busbw_gbps")),
        goodput=_number(m.get("goodput")),
        lost_s=_number(m.get("lost_s")),
        mfu=_number(m.get("mfu")),
        hourly_usd=hourly,
        cost_usd=cost,
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def table(rows: Sequence[Row]) -> str:
    """A fixed-width table for the terminal."""
    headers = [
        "experiment",
        "status",
        "nodes x procs",
        "instance",
        "wall s",
        "job s",
        "throughput",
        "loss",
        "accuracy",
        "busbw GB/s",
        "goodput",
        "lost s",
        "MFU",
        "cost $",
    ]
    body = [
        [
            r.experiment,
            r.status,
            f"{r.nodes} x {r.processes_per_node}",
            r.instance_type,
            _cell(r.wall_time_s),
            _cell(r.job_duration_s),
            f"{_cell(r.throughput)} {r.throughput_unit or ''}".strip() if r.throughput is not None else "-",
            _cell(r.final_loss),
            _cell(r.final_accuracy),
            _cell(r.busbw_gbps),
            _cell(r.goodput),
            _cell(r.lost_s),
            _cell(r.mfu),
            _cell(r.cost_usd),
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[Row]) -> str:
    """One line per experiment, the columns of :class:`Row` (empty cells for what was not measured)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})
    return out.getvalue()


def to_json(rows: Sequence[Row], **about: Any) -> str:
    """The rows and what the run was (``about``: run, stack, results location, fixed hourly cost...)."""
    total = [r.cost_usd for r in rows if r.cost_usd is not None]
    doc = {
        **about,
        "experiments": [asdict(r) for r in rows],
        "experimentsCostUsd": round(sum(total), 4) if total else None,
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def chart_png(rows: Sequence[Row], title: str) -> bytes:
    """A PNG with one horizontal bar chart per measure the experiments report: throughput (one panel per unit),
    all-reduce bus bandwidth, wall time and cost; experiments that did not succeed in red."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write files only
    from matplotlib import pyplot as plt

    status = {r.experiment: r.status for r in rows}
    panels: list[tuple[str, list[tuple[str, float]]]] = []
    for unit in dict.fromkeys(r.throughput_unit for r in rows if r.throughput is not None):
        panels.append(
            (
                f"Throughput ({unit})",
                [(r.experiment, r.throughput) for r in rows if r.throughput is not None and r.throughput_unit == unit],
            )
        )
    for label, attr in (
        ("All-reduce bus bandwidth (GB/s)", "busbw_gbps"),
        ("Goodput", "goodput"),
        ("Wall time (s)", "wall_time_s"),
        ("Cost of the nodes (USD)", "cost_usd"),
    ):
        values = [(r.experiment, float(getattr(r, attr))) for r in rows if getattr(r, attr) is not None]
        if values:
            panels.append((label, values))
    if not panels:
        panels.append(("No experiment reported a measure", []))
    height = max(1.2 + 0.35 * len(rows), 2.0)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, height * len(panels)), squeeze=False)
    for ax, (label, values) in zip(axes[:, 0], panels):
        names = [n for n, _ in values]
        numbers = [v for _, v in values]
        colors = ["#3b7dd8" if status.get(n) == "Succeeded" else "#c0392b" for n in names]  # red: did not succeed
        bars = ax.barh(names, numbers, color=colors)
        ax.bar_label(bars, labels=[_cell(v) for v in numbers], padding=3, fontsize=8)
        ax.set_title(label, fontsize=10, loc="left")
        ax.invert_yaxis()
        ax.margins(x=0.2)
        ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=CHART_DPI)
    plt.close(fig)
    return buf.getvalue()
