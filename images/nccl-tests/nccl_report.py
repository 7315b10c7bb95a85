"""Run an nccl-tests benchmark (under ``mpirun``) and report its bus bandwidth as JSON, like the project's
all-reduce health check does.

Usage (the MPIJob launcher's command)::

    python3 /opt/nccl-report/nccl_report.py --output-json $(OUTPUT_DIR)/nccl-tests.json \\
        [--metrics-json $(OUTPUT_DIR)/metrics.json] [--min-busbw-gbps 350] -- mpirun ... /opt/nccl-tests/build/all_reduce_perf -b 8 -e 2G -f 2 -g 1

The command's output is passed through unchanged; its result table is parsed (columns found by name in
the header, ``mpirun --tag-output`` prefixes removed, numbers in plain or exponent notation) into one row
per message size with the out-of-place and in-place time, algorithm and bus bandwidth (GB/s, 1e9 bytes/s),
plus nccl-tests' own "Avg bus bandwidth". ``--metrics-json`` also writes the project's metrics file (the fields
of training/metrics.py: the bus bandwidth at the largest size, the benchmark's wall time). Exit codes: the command's own when it fails; 3 when the bus
bandwidth at the largest size is below ``--min-busbw-gbps``; 4 when nccl-tests reports wrong results;
5 when no result row could be read; 2 usage error; else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

TAG_RE = re.compile(r"^\[[0-9,]+\]<std(?:out|err)>:")
AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
EXIT_USAGE, EXIT_BELOW, EXIT_WRONG, EXIT_NO_RESULTS = 2, 3, 4, 5


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse(lines: Iterable[str]) -> dict[str, Any]:
    """Rows and the average bus bandwidth of nccl-tests output."""
    header: list[str] = []
    rows: list[dict[str, Any]] = []
    average: float | None = None
    for raw in lines:
        line = TAG_RE.sub("", raw.rstrip("\n")).strip()
        if not line:
            continue
        if m := AVG_RE.match(line):
            average = _number(m.group(1))
            continue
        if line.startswith("#"):
            words = line.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                header = words
            continue
        if not header:
            continue
        cells = line.split()
        if len(cells) != len(header) or not cells[0].isdigit():
            continue
        # the header names the out-of-place block first, then the in-place block (same column names)
        seen: dict[str, int] = {}
        row: dict[str, Any] = {}
        for name, cell in zip(header, cells):
            n = seen.get(name, 0)
            seen[name] = n + 1
            block = (
                ""
                if name in ("size", "count", "type", "redop", "root")
                else ("out_of_place_" if n == 0 else "in_place_")
            )
            key = block + name.replace("#", "").lower()
            row[key] = cell if name in ("type", "redop") else _number(cell) if cell != "N/A" else None
        rows.append(row)
    return {"rows": rows, "avg_busbw_gbps": average}


def summarize(parsed: dict[str, Any], min_busbw: float | None, command_rc: int) -> dict[str, Any]:
    """The report and its exit code."""
    rows = parsed["rows"]
    wrong = sum(int(r.get(k) or 0) for r in rows for k in ("out_of_place_wrong", "in_place_wrong"))
    largest = max(rows, key=lambda r: r["size"]) if rows else None
    busbw = None
    if largest is not None:
        busbw = max(v for v in (largest.get("out_of_place_busbw"), largest.get("in_place_busbw")) if v is not None)
    if command_rc:
        code, reason = command_rc, f"the benchmark exited {command_rc}"
    elif not rows:
        code, reason = EXIT_NO_RESULTS, "no result rows in the output"
    elif wrong:
        code, reason = EXIT_WRONG, f"{wrong} wrong element(s) reported"
    elif min_busbw is not None and (busbw or 0.0) < min_busbw:
        code, reason = (
            EXIT_BELOW,
            f"bus bandwidth {busbw} GB/s at {largest['size'] if largest else 0} bytes is below {min_busbw}",
        )
    else:
        code, reason = 0, "ok"
    return {
        "event": "nccl_tests_summary",
        "exit_code": code,
        "reason": reason,
        "busbw_gbps_at_max_size": busbw,
        "max_size_bytes": largest["size"] if largest else None,
        "avg_busbw_gbps": parsed["avg_busbw_gbps"],
        "min_busbw_gbps": min_busbw,
        "results": rows,
    }


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


#: The fields of the project's metrics files (training/metrics.py; this image has no copy of that module).
METRICS_SCHEMA = "eks-training.metrics/1"
METRICS_FIELDS = (
    "program",
    "wall_time_s",
    "throughput",
    "throughput_unit",
    "final_loss",
    "final_accuracy",
    "busbw_gbps",
    "world_size",
)


def metrics(report: dict[str, Any], wall_time_s: float) -> dict[str, Any]:
    """The report as the project's ``metrics.json``: ``busbw_gbps`` at the largest message size."""
    record: dict[str, Any] = {"schema": METRICS_SCHEMA, **{k: None for k in METRICS_FIELDS}}
    record.update(
        program="nccl_report.py",
        wall_time_s=round(wall_time_s, 3),
        busbw_gbps=report["busbw_gbps_at_max_size"],
        avg_busbw_gbps=report["avg_busbw_gbps"],
        max_size_bytes=report["max_size_bytes"],
        exit_code=report["exit_code"],
    )
    return record


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("nccl_report.py: error: give the benchmark command after --", file=sys.stderr)
        return EXIT_USAGE
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="nccl_report.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--metrics-json", type=Path, default=None)
    parser.add_argument("--min-busbw-gbps", type=float, default=None)
    try:
        args = parser.parse_args(argv[:cut])
    except SystemExit:
        return EXIT_USAGE
    command = argv[cut + 1 :]
    if not command:
        print("nccl_report.py: error: no command after --", file=sys.stderr)
        return EXIT_USAGE
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    rc = proc.wait()
    report = summarize(parse(lines), args.min_busbw_gbps, rc)
    print(json.dumps({k: v for k, v in report.items() if k != "results"}), flush=True)
    if args.output_json is not None:
        write_json_atomic(args.output_json, report)
    if args.metrics_json is not None:
        write_json_atomic(args.metrics_json, metrics(report, time.monotonic() - started))
    return int(report["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
