"""The metrics every benchmarked program writes next to its outputs: ``<output dir>/metrics.json``.

One flat JSON object, the same fields whatever wrote it, so the benchmark collector and the summary compare
experiments of different kinds without knowing their programs::

    {"schema": "eks-training.metrics/1", "program": "synthetic_benchmark.py",
     "wall_time_s": 81.2, "throughput": 1530.4, "throughput_unit": "images/s",
     "final_loss": 6.91, "final_accuracy": null, "busbw_gbps": null, "world_size": 4, ...}

``wall_time_s`` is the program's own measurement of its work; ``throughput`` is in ``throughput_unit``;
``busbw_gbps`` is the all-reduce bus bandwidth in GB/s (1e9 bytes/s, as nccl-tests reports it) at the largest
message size. A field a program does not measure is ``null``. Extra fields are kept as they are. Only the
standard library is used (the nccl-tests and Horovod images write the same fields with their own few lines).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

SCHEMA = "eks-training.metrics/1"
FILE_NAME = "metrics.json"
#: The fields every metrics file has (``None`` when the program does not measure it).
FIELDS = (
    "program",
    "wall_time_s",
    "throughput",
    "throughput_unit",
    "final_loss",
    "final_accuracy",
    "busbw_gbps",
    "world_size",
)


def metrics_record(program: str, **fields: Any) -> dict[str, Any]:
    """The metrics object: the schema, every field of :data:`FIELDS` (``None`` unless given), then the extras."""
    record: dict[str, Any] = {"schema": SCHEMA}
    record.update({name: None for name in FIELDS})
    record["program"] = program
    record.update(fields)
    return record


def write_metrics(path: str | os.PathLike[str], program: str, **fields: Any) -> Path:
    """Write :func:`metrics_record` to ``path`` (a file, or a folder to put ``metrics.json`` in) atomically:
    write a temporary file, fsync, rename. Returns the file written."""
    target = Path(path)
    if target.is_dir():
        target = target / FILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; other pods (other uids) read the metrics
        with os.fdopen(fd, "w") as f:
            json.dump(metrics_record(program, **fields), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
