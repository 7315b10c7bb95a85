"""What the local runner says while it runs: progress read from the pods' logs, a failure's reason as one line with
its fix (the runner's error, :class:`LocalRunError`, with the end of the log), and the results a job left in its output
folder.

Progress: the pods' new log lines are read while they run. The bundled programs' JSON events become short lines
(``train.py``'s ``epoch``, ``resumed``, ``done``; ``evaluate.py``'s ``evaluation``; ``stage_data.py``'s progress);
a job's own plain output is shown as it is; torchrun's and the launcher's bookkeeping is left in the logs.
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

#: torchrun's (glog-style) log lines: ``I1125 20:49:47.229000 26970 torch/distributed/run.py:747] ...``.
_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")
#: Lines a job's output shows that are the machinery's, not the job's.
_NOISE = re.compile(
    r"^(\[rank\d+\]:)?(\[[WI]\d{4} |\*{5,}|Setting OMP_NUM_THREADS|  warnings\.warn|.*UserWarning|frame #\d+: |"
    r"Exception raised from |<omitting python frames>)"
)
#: Launcher events worth a line (the rest is bookkeeping).
_SHOWN_LAUNCH = {"already_complete", "run_failed"}
#: How a FAILED of arguments the script's argparse refused begins (``training/run_script.py``'s ``REFUSED``).
REFUSED = "the script refused its arguments"


def _num(value: Any, digits: int = 4) -> str:
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def event_line(event: dict[str, Any], job: str = "JOB") -> Optional[str]:
    """A short line for a JSON event of the bundled programs (of ``job``), or ``None`` for one not worth showing."""
    name = event.get("event")
    if event.get("component") == "launch":
        if name == "already_complete":
            return f"the run is already complete (its DONE marker exists): nothing to run; --fresh {job} starts anew"
        if name == "run_failed":
            reason = (event.get("failed") or {}).get("reason", "see FAILED")
            return f"the run gave up earlier ({reason}); --fresh {job} starts a new run"
        return None
    if name == "epoch":
        parts = [f"epoch {event.get('epoch')}/{event.get('epochs')}", f"step {event.get('step')}"]
        for key, label in (
            ("train_loss", "loss"),
            ("train_accuracy", "accuracy"),
            ("test_accuracy", "test accuracy"),
            ("images_per_sec", "images/s"),
        ):
            if event.get(key) is not None:
                parts.append(f"{label} {_num(event[key])}")
        return ", ".join(parts)
    if name in ("resumed", "fresh_start"):
        return (
            "resumed from " + str(event.get("checkpoint")) + f" (epoch {event.get('epoch')}, step {event.get('step')})"
            if name == "resumed"
            else "training from scratch"
        )
    if name == "done":
        return f"done: test accuracy {_num(event.get('test_accuracy'))}, model {event.get('model')}"
    if name == "evaluation":
        return f"evaluation: accuracy {_num(event.get('accuracy'))} ({event.get('output_json')})"
    if name in ("gave_up", "fatal", "stopping", "lease_wait", "warning"):
        return f"{name}: {event.get('text') or event.get('error') or event.get('message') or ''}".rstrip(": ")
    if name in ("download_start", "download_done", "download_retry", "staged", "already_staged", "failed", "restaging"):
        return (
            name.replace("_", " ")
            + ": "
            + ", ".join(f"{k} {v}" for k, v in event.items() if k not in ("event", "time"))
        )
    return None


def progress_line(text: str, job: str = "JOB") -> Optional[str]:
    """What a log line of ``job`` shows the user while the job runs, or ``None``."""
    line = text.rstrip()
    if not line.strip() or _GLOG.match(line) or _NOISE.match(line):
        return None
    if line.startswith("{"):
        try:
            event = json.loads(line)
        except ValueError:
            return line
        if isinstance(event, dict) and "event" in event:
            return event_line(event, job)
        return line  # the job's own JSON metrics
    return line


@dataclass
class LogFollower:
    """New complete lines of a log file, each time :meth:`lines` is called."""

    path: Path
    offset: int = 0
    partial: bytes = field(default=b"")

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *complete, self.partial = data.split(b"\n")
        return [c.decode(errors="replace") for c in complete]


#: The last line of the traceback torchrun prints when a signal stops it (the runner's stop on Ctrl-C, a pod's
#: SIGTERM): its own machinery's, not the job's.
_TORCHRUN_STOPPED = "torch.distributed.elastic.multiprocessing.api.SignalException"


@dataclass
class PodProgress:
    """What one pod's new log lines show the user (:func:`progress_line`). A traceback is held until its last line:
    the job's own is shown whole, and torchrun's when a signal stopped it is left in the log."""

    follower: LogFollower
    job: str = "JOB"
    held: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return self._shown(self.follower.lines())

    def rest(self) -> list[str]:
        """The new lines and a traceback still held: the pod has exited, so it is whole."""
        shown, self.held = self._shown(self.follower.lines()) + self._block(self.held), []
        return shown

    def _shown(self, new: list[str]) -> list[str]:
        shown: list[str] = []
        for line in new:
            if self.held or line.startswith("Traceback (most recent call last):"):
                self.held.append(line)
                if len(self.held) > 1 and line[:1] not in ("", " ", "\t"):  # the exception's line ends it
                    shown += self._block(self.held)
                    self.held = []
                continue
            text = progress_line(line, self.job)
            if text:
                shown.append(text)
        return shown

    def _block(self, lines: list[str]) -> list[str]:
        if lines and lines[-1].startswith(_TORCHRUN_STOPPED):
            return []
        return [text for line in lines if (text := progress_line(line, self.job))]


#: How torch prefixes a rank's lines of an uncaught exception (``[rank1]: FileNotFoundError: ...``).
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b")
#: torchrun's own exceptions, which wrap the program's (its summary, a signal it got).
_TORCHRUN_EXCEPTION = "torch.distributed.elastic."
#: What a rank raises when another rank's process went away (training/run_script.py's PEER_LOSS, tied by a test).
_PEER_LOSS = ("Connection closed by peer", "Connection reset by peer")


def exception_line(lines: list[str]) -> Optional[str]:
    """The last exception the program raised, as its traceback's last line: a rank's prefix removed, torchrun's
    wrappers (``ChildFailedError``, ``SignalException``) and a rank's loss of a peer that went away (the effect of
    another rank's failure) passed over while the program's own is there."""
    found = [text for ln in lines if _EXCEPTION.match(text := _RANK_PREFIX.sub("", ln.strip()))]
    own = [t for t in found if not t.startswith(_TORCHRUN_EXCEPTION) and not any(p in t for p in _PEER_LOSS)]
    return (own or found)[-1] if found else None


def failure(log_text: str, code: Optional[int], argv0: str, job: str = "JOB") -> tuple[str, str]:
    """A failed process's reason (one line, from its log) and the fix, as far as the log tells them; ``job`` names
    the job in the fix's command-line flags. The first reading that applies: the run gave up (FAILED), a missing
    module, a command not found, else the program's own error."""
    events = _json_events(log_text)
    return (
        _gave_up(events, code, job, log_text)
        or _missing_module(log_text)
        or _not_started(events, code, argv0)
        or _program_error(events, log_text, code, job)
    )


def _json_events(log_text: str) -> list[dict[str, Any]]:
    """The log's JSON lines that are objects (the launcher's and the bundled programs' events)."""
    events = []
    for line in log_text.splitlines():
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                events.append(value)
    return events


def _gave_up(
    events: list[dict[str, Any]], code: Optional[int], job: str, log_text: str = ""
) -> Optional[tuple[str, str]]:
    """The run gave up: the launcher's run_failed (FAILED before torchrun), or its command_exit after a program that
    wrote FAILED itself, or the launcher's exit 3; with the program's last exception, where the log has one."""
    failed = next(
        (
            e
            for e in reversed(events)
            if e.get("event") == "run_failed" or (e.get("event") == "command_exit" and e.get("failed") is not None)
        ),
        None,
    )
    if failed is None and code != 3:
        return None
    given = (failed or {}).get("failed") or {}
    reason = given.get("reason") or given.get("text") or "FAILED exists in its output folder"
    if reason.startswith(REFUSED):
        return (
            f"the run gave up: {reason}",
            f"its args in the stack file, or --args {job}=...; other arguments make a run of their own (no --fresh "
            "needed)",
        )
    exc = exception_line([ln for ln in log_text.splitlines() if ln.strip() and not ln.startswith("{")])
    return (
        f"the run gave up: {reason}" + (f"; its last error: {exc}" if exc else ""),
        "find the cause (earlier in the log, or in the log of the run before, <job>-<pod>.previous.log), then run "
        f"it again: a change to the job's code folder or args makes a run of its own; otherwise add --fresh {job} "
        "(a new run; the failed run's folder is kept aside)",
    )


def _missing_module(log_text: str) -> Optional[tuple[str, str]]:
    """The Python the job runs with lacks PyTorch, or another module."""
    if re.search(r"No module named '?torch'?", log_text):
        return (
            "PyTorch is not installed in the Python the job runs with",
            "install it there: pip install torch --index-url https://download.pytorch.org/whl/cpu (the CPU build), "
            "or give a virtualenv that has it with --venv IMAGE=DIR",
        )
    missing = re.findall(r"No module named '([\w.]+)'", log_text)
    if missing:
        return (
            f"the Python the job runs with lacks the module {missing[-1]}",
            f"install it there (pip install {missing[-1].split('.')[0]}), or give a virtualenv that has it with "
            "--venv IMAGE=DIR",
        )
    return None


def _not_started(events: list[dict[str, Any]], code: Optional[int], argv0: str) -> Optional[tuple[str, str]]:
    """The command could not be started (exit 127): the launcher's exec_failed names it, else the process's own."""
    if code != 127:
        return None
    started = next((e.get("command") for e in events if e.get("event") == "exec_failed"), None)
    what = started[0] if isinstance(started, list) and started else argv0
    return (
        f"{what} could not be started (not found)",
        f"put {what} on PATH (torchrun comes with PyTorch), or give the image's virtualenv with --venv IMAGE=DIR",
    )


def _program_error(events: list[dict[str, Any]], log_text: str, code: Optional[int], job: str) -> tuple[str, str]:
    """The program's own error: a bundled program's fatal event, else its last exception, else the log's last line;
    with the fix where the reason shows it (a dataset not found, a path under /workspace)."""
    fatal = next((e for e in reversed(events) if e.get("event") == "fatal"), None)
    lines = [ln for ln in log_text.splitlines() if ln.strip() and not _GLOG.match(ln) and not ln.startswith("{")]
    exc = exception_line(lines)
    reason = (fatal or {}).get("error") or exc or (lines[-1].strip() if lines else f"exit status {code}")
    if "not found in" in reason or "cifar-10-batches-py" in reason:
        return reason, "give the dataset's folder with --dataset NAME=PATH (see its layout in --help)"
    if "/workspace" in reason:
        return reason, (
            "/workspace holds a job's code in the pods (its code: a folder of your project, or s3://...); "
            f"here it is that folder, or the one given with --code {job}=PATH"
        )
    return reason, "see the end of the log below"


class LocalRunError(Exception):
    """A job cannot run here, or failed: :attr:`reason` (one line), :attr:`fix` and the log that shows it."""

    def __init__(self, reason: str, *, fix: str = "", log: Optional[Path] = None) -> None:
        self.reason, self.fix, self.log = reason, fix, log
        super().__init__(reason + (f"; fix: {fix}" if fix else ""))

    def report(self, lines: int = 15) -> str:
        """The reason and fix on one line, then the end of the log, without torchrun's INFO lines, the launcher's
        events and C++ stack frames: the script's own last words (a traceback, an argument error) show the cause."""
        text = str(self)
        if self.log is not None:
            end = [line for line in tail(self.log, 20000).splitlines() if not _LOG_NOISE.match(line)][-lines:]
            text += (
                f"\nlast lines of {self.log} (torchrun's INFO lines, the launcher's events and C++ stack frames left "
                "out):\n" + "\n".join(f"  {line}" for line in end)
            )
        return text


#: A log line that rarely shows a failure's cause: torchrun's agent logs INFO in glog's format
#: (``I1203 14:10:16.404000 20076 torch/distributed/...``), the launcher writes its events as JSON lines, and a C++
#: exception of torch's (c10d's store going away as the other ranks end) prints its stack frame by frame
#: (``Exception raised from recvBytes at ...``, then ``frame #0: ...``).
_LOG_NOISE = re.compile(r'I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ |\{"event": |\s*frame #\d+: |Exception raised from ')


def tail(path: Path, chars: int = 3000) -> str:
    """The end of a log file."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def results(output: Path) -> list[str]:
    """What a job left in its output folder: its metrics (``metrics.json``), evaluation (``evaluation.json``) and
    other top-level files."""
    out = []
    metrics = _json(output / "metrics.json")
    if metrics:
        parts = []
        for key, label in (
            ("final_accuracy", "accuracy"),
            ("final_loss", "loss"),
            ("busbw_gbps", "bus bandwidth GB/s"),
            ("wall_time_s", "wall time s"),
        ):
            if metrics.get(key) is not None:
                parts.append(f"{label} {_num(metrics[key])}")
        if metrics.get("throughput") is not None:
            parts.append(f"throughput {_num(metrics['throughput'])} {metrics.get('throughput_unit') or ''}".rstrip())
        out.append("metrics.json: " + (", ".join(parts) or "written"))
        line = goodput_line(metrics)
        if line:
            out.append(line)
    evaluation = _json(output / "evaluation.json")
    if evaluation and evaluation.get("accuracy") is not None:
        out.append(f"evaluation.json: accuracy {_num(evaluation['accuracy'])} on {evaluation.get('total', '?')} images")
    files = (
        sorted(p.name + ("/" if p.is_dir() else "") for p in output.iterdir() if not p.name.startswith("."))
        if output.is_dir()
        else []
    )
    if files:
        out.append("files: " + ", ".join(files[:12]) + (f", ... ({len(files)} in all)" if len(files) > 12 else ""))
    return out


def goodput_line(metrics: dict[str, Any]) -> Optional[str]:
    """The goodput the launchers accounted (``training/goodput.py``): productive training time over the wall time,
    where the rest went, what failures cost, and the model FLOPs utilization when the trainer knew it."""
    if "goodput" in metrics and metrics["goodput"] is None:
        return (
            "goodput: not measured: no attempt printed two progress lines with a rising step (a step number, "
            "docs/reference/job-contract.md#progress-for-goodput)"
        )
    if metrics.get("goodput") is None:
        return None
    split = metrics.get("time_split_s") or {}
    where = ", ".join(f"{name} {_num(seconds, 3)}" for name, seconds in split.items() if seconds)
    text = (
        f"goodput {_num(metrics['goodput'])} ({_num(split.get('training', 0), 3)} s training of "
        f"{_num(metrics.get('goodput_wall_s'), 3)} s: {where}); lost to failures {_num(metrics.get('lost_s'), 3)} s, "
        f"{metrics.get('recomputed_steps', 0)} step(s) recomputed, {metrics.get('attempts', '?')} attempt(s)"
    )
    if metrics.get("mfu") is not None:
        text += f"; model FLOPs utilization {_num(metrics['mfu'])}"
    return text


def _json(path: Path) -> Optional[dict[str, Any]]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


__all__ = [
    "LocalRunError",
    "LogFollower",
    "PodProgress",
    "event_line",
    "failure",
    "goodput_line",
    "progress_line",
    "results",
    "tail",
]
