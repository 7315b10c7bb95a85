"""Where a job's wall time went, and its goodput: productive training time / wall time.

The pod's launcher (``launch.py``) feeds every line its command prints to a :class:`LineWatcher`, which keeps what
tells time (a trainer starting, its steps, checkpoints, evaluations, a stop) in a :class:`Ledger` on the job's output
folder: ``<output>/goodput/<pod>-<pid>.jsonl``, one JSON object a line, appended by a thread of its own. When the run
is complete, :func:`account` splits the wall time into :data:`CATEGORIES` from every pod's ledger, for
``metrics.json``. Only the standard library is used: the launcher must not import torch. The lines it reads and the
categories: "Goodput per job" in docs/explanation/operations.md."""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

#: The ledger's folder inside the job's output folder.
LEDGER_DIR = "goodput"
#: The environment variable naming a user's progress line pattern (its first group: the step).
STEP_PATTERN_ENV = "GOODPUT_STEP_PATTERN"
#: The split of the wall time, in the order reports show it.
CATEGORIES = ("waiting", "starting", "training", "checkpointing", "evaluating", "finishing", "restarting", "recomputed")
#: The categories that are time lost to failures.
LOST = ("restarting", "recomputed")
#: The ``component`` of the line ``run_script.py`` prints on rank 0 as it starts a script (``{"event": "attempt"}``):
#: a script of the user's tells the ledger no other way that torchrun started it again after a failure.
WRAPPER = "run_script"


# --------------------------------------------------------------------------- #
# Writing the ledger
# --------------------------------------------------------------------------- #
class Ledger:
    """One launcher's ledger file, appended by a daemon thread: :meth:`record` never waits for the volume."""

    def __init__(self, output_dir: Path, source: str) -> None:
        self.path = Path(output_dir) / LEDGER_DIR / f"{source}.jsonl"
        self.source = source
        self._queue: queue.Queue[Optional[str]] = queue.Queue()
        self._thread = threading.Thread(target=self._write, name="goodput-ledger", daemon=True)
        self._thread.start()
        self.error: Optional[str] = None

    def record(self, kind: str, at: Optional[float] = None, **fields: Any) -> None:
        """Queue one record (``time`` defaults to now)."""
        item = {"kind": kind, "time": round(time.time() if at is None else at, 3), "source": self.source, **fields}
        self._queue.put(json.dumps(item, default=str))

    def _write(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as out:
                while True:
                    line = self._queue.get()
                    if line is None:
                        return
                    out.write(line + "\n")
                    out.flush()
        except OSError as exc:  # the accounting is lost, the job is not
            self.error = repr(exc)

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is queued (waiting at most ``timeout``); True if everything was written."""
        self._queue.put(None)
        self._thread.join(timeout)
        return not self._thread.is_alive() and self.error is None


def read_ledgers(output_dir: Path) -> list[dict[str, Any]]:
    """Every record of every ledger under ``output_dir`` (lines that do not parse are skipped: a writer killed
    mid-line)."""
    records = []
    for path in sorted((Path(output_dir) / LEDGER_DIR).glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("time"), (int, float)):
                records.append(value)
    return records


class LineWatcher:
    """Turns a command's output lines into ledger records (docs/explanation/operations.md, "Goodput per job")."""

    def __init__(self, ledger: Ledger, step_pattern: Optional[str] = None) -> None:
        self.ledger = ledger
        self.pattern = re.compile(step_pattern) if step_pattern else None
        self.attempts = 0
        self.last_step: Optional[int] = None
        self.opened_by_wrapper = False

    def new_attempt(self, at: Optional[float] = None, *, by_wrapper: bool = False, **fields: Any) -> None:
        """A new attempt began (``at``: when its process started; ``by_wrapper``: the line is run_script's)."""
        self.attempts += 1
        self.last_step = None
        self.opened_by_wrapper = by_wrapper
        self.ledger.record("start", at=at, attempt=self.attempt_id, **fields)

    @property
    def attempt_id(self) -> str:
        return f"{self.ledger.source}#{self.attempts}"

    def _step(self, step: int, at: Optional[float]) -> None:
        if self.attempts == 0 or (self.last_step is not None and step < self.last_step):
            self.new_attempt(at)
        self.last_step = step
        self.ledger.record("step", at=at, attempt=self.attempt_id, step=step)

    def line(self, text: str) -> None:
        """Read one line of the command's output."""
        stripped = text.strip()
        event: Optional[dict[str, Any]] = None
        if stripped.startswith("{"):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            event = value if isinstance(value, dict) else None
        if event is not None and event.get("component") != "launch":
            self._event(event)
            return
        if self.pattern is not None:
            match = self.pattern.search(text)
            if match:
                try:
                    self._step(int(match.group(1) if match.groups() else match.group(0)), None)
                except ValueError:
                    pass

    def _event(self, event: dict[str, Any]) -> None:
        name = event.get("event")
        at = event.get("time") if isinstance(event.get("time"), (int, float)) else None
        step = event.get("step")
        step = step if isinstance(step, int) and not isinstance(step, bool) else None
        if name == "attempt" and event.get("component") == WRAPPER:
            self.new_attempt(at, by_wrapper=True)
        elif name == "start" and self.opened_by_wrapper and self.last_step is None:
            pass  # the program's own start (the bundled trainer's), in the attempt its wrapper opened
        elif name == "start":
            setup = event.get("setup_s")
            began = at - float(setup) if at is not None and isinstance(setup, (int, float)) else at
            self.new_attempt(began, world_size=event.get("world_size"))
        elif name in ("resumed", "fresh_start"):
            if self.attempts == 0:
                self.new_attempt(at)
            self.ledger.record("resume", at=at, attempt=self.attempt_id, step=step if name == "resumed" else 0)
        elif name in ("first_step", "progress"):
            if step is not None:
                self._step(step, at)
        elif name == "checkpoint":
            staged, stage = event.get("staged_at"), event.get("stage_s")
            if isinstance(staged, (int, float)) and isinstance(stage, (int, float)):
                self.ledger.record(
                    "held", at=staged, attempt=self.attempt_id, seconds=float(stage), category="checkpointing"
                )
        elif name == "epoch":
            if step is not None:
                self._step(step, at)
            held = event.get("eval_s")
            if at is not None and isinstance(held, (int, float)):
                self.ledger.record(
                    "held", at=at - float(held), attempt=self.attempt_id, seconds=float(held), category="evaluating"
                )
        elif name == "stopping":
            wait = event.get("checkpoint_wait_s")
            if step is not None and at is not None:
                # the group stopped after ``step``; the stop's checkpoint was written in the last ``wait`` seconds
                reached = at - float(wait) if isinstance(wait, (int, float)) else at
                self._step(step, reached)
            self.ledger.record("stopped", at=at, attempt=self.attempt_id, step=step)
        elif name == "done":
            self.ledger.record("done", at=at, attempt=self.attempt_id)
        elif step is not None and name is None:
            self._step(step, at)  # a user's {"step": N}


# --------------------------------------------------------------------------- #
# The accounting
# --------------------------------------------------------------------------- #
@dataclass
class _Attempt:
    id: str
    start: float
    points: list[tuple[float, int]] = field(default_factory=list)
    held: list[tuple[float, float, str]] = field(default_factory=list)
    resume_step: Optional[int] = None
    ended: Optional[str] = None  # "stopped", "done" or None (failed, or still running)
    end_time: Optional[float] = None


@dataclass
class _Work:
    """Training time of the steps (lo, hi] of one attempt."""

    attempt: str
    lo: int
    hi: int
    seconds: float


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


@dataclass
class _Split:
    """The split of the wall time from ``t0`` to ``end`` as the attempts are read, in start order."""

    t0: float
    end: float
    totals: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in CATEGORIES})
    kept: list[_Work] = field(default_factory=list)
    recomputed_steps: int = 0
    interruptions: list[dict[str, Any]] = field(default_factory=list)

    def add(self, category: str, a0: float, a1: float) -> None:
        """Count the time from ``a0`` to ``a1`` (clipped to the run) as ``category``."""
        a0, a1 = max(a0, self.t0), min(a1, self.end)
        if a1 > a0:
            self.totals[category] += a1 - a0


def account(records: Iterable[dict[str, Any]], end: Optional[float] = None) -> dict[str, Any]:
    """The split of a job's wall time from its ledger records (:func:`read_ledgers`); ``end``: the run's end (default:
    the ``done`` record, else the newest record). docs/explanation/operations.md explains the categories."""
    records = sorted(records, key=lambda r: float(r["time"]))
    if not records:
        return _nothing_recorded()
    t0 = _run_start(records)
    if end is None:
        end = _run_end(records)
    order = _attempts(records)
    split = _Split(t0, end)
    split.add("waiting", t0, order[0].start if order else end)
    previous: Optional[_Attempt] = None
    for index, a in enumerate(order):
        followed = index + 1 < len(order)
        _split_attempt(split, a, previous, order[index + 1].start if followed else end, followed)
        previous = a
    return _result(split, order)


def _nothing_recorded() -> dict[str, Any]:
    return {
        "goodput": None,
        "wall_s": 0.0,
        "time_s": {c: 0.0 for c in CATEGORIES},
        "lost_s": 0.0,
        "recomputed_steps": 0,
        "attempts": 0,
        "interruptions": [],
    }


def _run_start(records: list[dict[str, Any]]) -> float:
    """The first launch or start, else the first record."""
    return (
        min(float(r["time"]) for r in records if r["kind"] in ("launch", "start"))
        if any(r["kind"] in ("launch", "start") for r in records)
        else float(records[0]["time"])
    )


def _run_end(records: list[dict[str, Any]]) -> float:
    """The last ``done`` record, else the newest record."""
    done = [float(r["time"]) for r in records if r["kind"] == "done"]
    return max(done) if done else max(float(r["time"]) for r in records)


def _attempts(records: list[dict[str, Any]]) -> list[_Attempt]:
    """Every attempt with its steps, held time and end, in start order."""
    attempts: dict[str, _Attempt] = {}
    for r in records:
        key = r.get("attempt")
        if r["kind"] == "start" and isinstance(key, str):
            attempts[key] = _Attempt(key, float(r["time"]))
    _read_attempt_records(records, attempts)
    _end_at_clean_exits(records, attempts)
    return sorted(attempts.values(), key=lambda a: a.start)


def _read_attempt_records(records: list[dict[str, Any]], attempts: dict[str, _Attempt]) -> None:
    for r in records:
        a = attempts.get(str(r.get("attempt")))
        if a is None:
            continue
        t = float(r["time"])
        if r["kind"] == "step":
            a.points.append((t, int(r["step"])))
        elif r["kind"] == "resume":
            a.resume_step = int(r["step"]) if isinstance(r.get("step"), int) else a.resume_step
        elif r["kind"] == "held":
            a.held.append((t, t + float(r["seconds"]), str(r["category"])))
        elif r["kind"] in ("stopped", "done"):
            a.ended, a.end_time = r["kind"], t


def _end_at_clean_exits(records: list[dict[str, Any]], attempts: dict[str, _Attempt]) -> None:
    """A command that exited 0 is done (the whole contract of a user's program: it prints no "done" line): its pod's
    last attempt ended then, and the time after its last step is finishing, not time lost to a failure; unless the
    run gave up (wrote its FAILED file), whose time after the last step stays lost. A command that exited after its
    launcher got a stop signal (a drain of its node) ended in an orderly stop, as a ``stopping`` line says it: the
    time until the next attempt is waiting, not lost (a user's program prints no ``stopping`` line); unless it had
    stopped stepping before the signal (:func:`_hung_before`)."""
    for r in records:
        if r["kind"] != "exit":
            continue
        if r.get("command_code") == 0 and not r.get("failed"):
            end = "done"
        elif r.get("stop_signal") and not r.get("failed"):
            end = "stopped"
        else:
            continue
        t = float(r["time"])
        mine = [a for a in attempts.values() if a.id.startswith(f"{r.get('source')}#") and a.start <= t]
        last = max(mine, key=lambda a: a.start, default=None)
        if last is None or last.ended is not None:
            continue
        if end == "stopped" and _hung_before(last, r.get("stop_at")):
            continue  # a program that had stopped stepping before the signal: the stop ended a failure
        last.ended, last.end_time = end, t


def _hung_before(a: _Attempt, stop_at: Any) -> bool:
    """The attempt's last step came longer before the stop signal than any gap between its steps so far: it had
    stopped stepping (a hang that the stop ended), so the time after its last step stays lost."""
    times = sorted(t for t, _ in a.points)
    if not isinstance(stop_at, (int, float)) or len(times) < 2:
        return False
    return float(stop_at) - times[-1] > max(b - t for t, b in zip(times, times[1:]))


def _split_attempt(split: _Split, a: _Attempt, previous: Optional[_Attempt], cutoff: float, followed: bool) -> None:
    """Add one attempt's time, up to ``cutoff`` (the next attempt's start, else the run's end)."""
    points = _rising_points(a, cutoff)
    after_failure = previous is not None and previous.ended is None
    if not points:  # never reached a step (failed or stopped while starting): the gap goes on
        split.add("restarting" if after_failure else "starting", a.start, cutoff)
        if after_failure:
            a.ended = None
        return
    # Steps an earlier attempt trained beyond where this one resumes are trained again.
    resume = a.resume_step if a.resume_step is not None else points[0][1] - 1
    _recompute(split, resume)
    if split.interruptions and split.interruptions[-1]["resumed_step"] is None:
        split.interruptions[-1]["resumed_step"] = resume
        split.interruptions[-1]["resumed_at"] = points[0][0]
    split.add("restarting" if after_failure else "starting", a.start, points[0][0])
    _split_steps(split, a, points)
    _split_attempt_end(split, a, points, cutoff, followed)


def _rising_points(a: _Attempt, cutoff: float) -> list[tuple[float, int]]:
    """The attempt's (time, step) points up to ``cutoff`` whose step never goes back."""
    monotonic: list[tuple[float, int]] = []
    for p in sorted(p for p in a.points if p[0] <= cutoff):
        if not monotonic or p[1] >= monotonic[-1][1]:
            monotonic.append(p)
    return monotonic


def _recompute(split: _Split, resume: int) -> None:
    """Move the training time of kept steps past ``resume`` to ``recomputed``."""
    for work in split.kept:
        if work.hi > resume:
            steps = work.hi - max(work.lo, resume)
            moved = work.seconds * steps / (work.hi - work.lo)
            split.totals["recomputed"] += moved
            split.recomputed_steps += steps
            if split.interruptions:
                split.interruptions[-1]["recomputed_steps"] += steps
                split.interruptions[-1]["recomputed_s"] += moved
            work.seconds -= moved
            work.hi = max(work.lo, resume)


def _split_steps(split: _Split, a: _Attempt, points: list[tuple[float, int]]) -> None:
    """Between two points: the held time (checkpointing, evaluating), the rest training if a step advanced."""
    for (t_a, s_a), (t_b, s_b) in zip(points, points[1:]):
        span = t_b - t_a
        held = {"checkpointing": 0.0, "evaluating": 0.0}
        for h0, h1, category in a.held:
            held[category] = held.get(category, 0.0) + _overlap(t_a, t_b, h0, h1)
        held_total = min(span, sum(held.values()))
        for category, seconds in held.items():
            split.totals[category] += seconds * (held_total / sum(held.values())) if held_total else 0.0
        if s_b > s_a:
            split.kept.append(_Work(a.id, s_a, s_b, span - held_total))
        else:
            split.totals["checkpointing"] += span - held_total  # no step advanced: the loop was held


def _split_attempt_end(
    split: _Split, a: _Attempt, points: list[tuple[float, int]], cutoff: float, followed: bool
) -> None:
    """After the last step: a stop's checkpoint and wait, a finish, or time lost to a failure."""
    last_t = points[-1][0]
    if a.ended in ("stopped", "done") and a.end_time is not None and a.end_time <= cutoff:
        split.add("checkpointing" if a.ended == "stopped" else "finishing", last_t, a.end_time)
        split.add("waiting" if a.ended == "stopped" else "finishing", a.end_time, cutoff)
        if a.ended == "stopped" and followed:
            split.interruptions.append(_interruption(a, "stop", a.end_time, points[-1][1]))
    else:
        a.ended = None
        split.add("restarting", last_t, cutoff)
        if followed:
            split.interruptions.append(_interruption(a, "failure", last_t, points[-1][1]))


def _interruption(a: _Attempt, cause: str, at: float, last_step: int) -> dict[str, Any]:
    return {
        "attempt": a.id,
        "cause": cause,
        "at": round(at, 3),
        "last_step": last_step,
        "resumed_step": None,
        "resumed_at": None,
        "recomputed_steps": 0,
        "recomputed_s": 0.0,
    }


def _result(split: _Split, order: list[_Attempt]) -> dict[str, Any]:
    totals = split.totals
    totals["training"] = sum(w.seconds for w in split.kept)
    wall = split.end - split.t0
    # What no record covers (rounding, a trailing gap) is finishing time, so the split adds up to the wall time.
    totals["finishing"] += max(0.0, wall - sum(totals.values()))
    for item in split.interruptions:
        item["recomputed_s"] = round(item["recomputed_s"], 3)
        resumed_at = item.pop("resumed_at")
        item["paused_s"] = round(resumed_at - item["at"], 3) if resumed_at is not None else None
        item.pop("attempt")
    lost = totals["restarting"] + totals["recomputed"]
    return {
        # training time is measured between two steps of one attempt, the second higher: without such a pair the
        # program's progress is not known, so there is no figure (rather than 0)
        "goodput": round(totals["training"] / wall, 4) if wall > 0 and split.kept else None,
        "wall_s": round(wall, 3),
        "time_s": {c: round(v, 3) for c, v in totals.items()},
        "lost_s": round(lost, 3),
        "recomputed_steps": split.recomputed_steps,
        "attempts": len(order),
        "interruptions": split.interruptions,
    }


def metrics_fields(accounting: dict[str, Any]) -> dict[str, Any]:
    """The fields the accounting adds to ``metrics.json``: ``goodput``, ``goodput_wall_s``, ``time_split_s``,
    ``lost_s``, ``recomputed_steps``, ``attempts``, ``interruptions``."""
    return {
        "goodput": accounting["goodput"],
        "goodput_wall_s": accounting["wall_s"],
        "time_split_s": accounting["time_s"],
        "lost_s": accounting["lost_s"],
        "recomputed_steps": accounting["recomputed_steps"],
        "attempts": accounting["attempts"],
        "interruptions": accounting["interruptions"],
    }


def source_name(host: Optional[str] = None) -> str:
    """This launcher's ledger name: the pod's host name and the process id."""
    name = host or os.environ.get("HOSTNAME") or os.uname().nodename
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{name}-{os.getpid()}")
