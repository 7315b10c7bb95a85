"""The run's markers in its output folder: ``DONE`` (it finished), read and written; ``FAILED`` (it gave up), read."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from launch_log import LaunchError, log
from run_script import FAILED_MARKER  # the marker train.py or run_script.py writes when the run gives up

DONE_MARKER = "DONE"


def read_done(output_dir: Path) -> dict[str, Any] | None:
    """Contents of ``DIR/DONE`` (``{}`` if not JSON), or ``None`` when the run is not finished."""
    marker = output_dir / DONE_MARKER
    try:
        text = marker.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, no permission, I/O error on the shared volume
        raise LaunchError(f"cannot read {marker}: {exc!r}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def record_done(output_dir: Path, command_code: int) -> dict[str, Any] | None:
    """Record that the run finished (the command exited 0): ``DIR/DONE`` written atomically (a temporary file of this
    process, then a rename, so the pods of a job may all record it), unless the program wrote its own. Returns the
    record, or ``None`` when it cannot be written (logged; the run still succeeded, but a new pod would run it
    again)."""
    record = {
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "by": "launch.py",
        "command_exit_code": command_code,
        "host": os.environ.get("HOSTNAME") or os.uname().nodename,
    }
    marker = output_dir / DONE_MARKER
    tmp = output_dir / f".{DONE_MARKER}.{record['host']}.{os.getpid()}.tmp"
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        if marker.exists():
            return read_done(output_dir)
        with open(tmp, "w") as out:
            out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, marker)
    except (OSError, LaunchError) as exc:
        log(
            "done_not_recorded",
            output_dir=str(output_dir),
            error=repr(exc),
            text="the command exited 0 but DONE could not be written; a new pod would run the command again",
        )
        try:
            tmp.unlink()
        except OSError:
            pass
        return None
    return record


def failed_now(output_dir: Path) -> bool | None:
    """Whether ``DIR/FAILED`` exists now: a cheap look while the command runs; ``None`` when the volume did not say
    (an I/O error). The end reads the marker again (:func:`read_failed`)."""
    try:
        os.stat(output_dir / FAILED_MARKER)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return True


def read_failed(output_dir: Path) -> dict[str, Any] | None:
    """Contents of ``DIR/FAILED`` (``{"text": ...}``, its first 500 characters, if not JSON: a user's program may
    write its reason as plain text; ``{}`` when it exists and cannot be read, such as a folder), or ``None`` when the
    run has not given up. A read that fails while the marker's existence is unknown (an I/O error on the shared
    volume) raises :class:`LaunchError`: it must not pass for a run that gave up, nor for one that did not."""
    marker = output_dir / FAILED_MARKER
    try:
        text = marker.read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        try:
            marker.lstat()
        except OSError:
            raise LaunchError(f"cannot read {marker}: {exc!r}") from exc
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {"text": text.strip()[:500]} if text.strip() else {}
    return data if isinstance(data, dict) else {}
