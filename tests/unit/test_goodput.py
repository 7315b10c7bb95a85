"""The goodput accounting (training/goodput.py) on synthetic output streams: the lines a trainer prints, read by the
launcher's :class:`goodput.LineWatcher` into a real ledger file, then :func:`goodput.account` over every ledger.

Each scenario's expected split is worked out by hand in its docstring (times in seconds after ``T``); the real-process
counterparts (a lost node, a drain, a frozen peer, a clean run) are in tests/real/test_training_faults_real.py and
tests/real/test_launch_real.py.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stacks.local.report import goodput_line

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

import goodput  # noqa: E402

T = 1_000_000.0


class Pod:
    """One launcher: its ledger and the watcher of its command's output."""

    def __init__(self, out: Path, name: str, launched: float, pattern: str | None = None) -> None:
        self.ledger = goodput.Ledger(out, name)
        self.ledger.record("launch", at=T + launched)
        self.watcher = goodput.LineWatcher(self.ledger, pattern)

    def say(self, at: float, event: str | None = None, **fields: Any) -> None:
        """The trainer prints one JSON line at ``T + at``."""
        record = ({"event": event} if event else {}) | {"time": T + at} | fields
        self.watcher.line(json.dumps(record) + "\n")

    def text(self, line: str) -> None:
        self.watcher.line(line + "\n")

    def close(self) -> None:
        assert self.ledger.close()


def split(out: Path, *pods: Pod) -> dict[str, Any]:
    for pod in pods:
        pod.close()
    return goodput.account(goodput.read_ledgers(out))


def assert_split(result: dict[str, Any], **expected: float) -> None:
    times = result["time_s"]
    want = {c: 0.0 for c in goodput.CATEGORIES} | expected
    assert times == pytest.approx(want, abs=0.002), times
    assert sum(times.values()) == pytest.approx(result["wall_s"], abs=0.005)


def test_a_clean_run(tmp_path: Path) -> None:
    """launch 0; the worker process starts at 1 (``start`` at 2 with setup_s 1); first step at 3; progress at 5;
    epoch 1 ends at 8 after 1 s of evaluation; its checkpoint is staged at 8 for 0.5 s; progress at 10; epoch 2 ends
    at 13 after 1 s of evaluation; done at 14.
    waiting 1, starting 2, training 2 + (3 - 1) + (2 - 0.5) + (3 - 1) = 7.5, checkpointing 0.5, evaluating 2,
    finishing 1: 14 s, goodput 7.5 / 14."""
    pod = Pod(tmp_path, "a", 0)
    pod.say(2, "start", setup_s=1.0, world_size=2)
    pod.say(2.5, "fresh_start")
    pod.say(3, "first_step", step=1)
    pod.say(5, "progress", step=10)
    pod.say(8, "epoch", step=20, eval_s=1.0)
    pod.say(8.6, "checkpoint", step=20, staged_at=T + 8, stage_s=0.5)
    pod.say(10, "progress", step=30)
    pod.say(13, "epoch", step=40, eval_s=1.0)
    pod.say(14, "done")
    result = split(tmp_path, pod)
    assert_split(result, waiting=1, starting=2, training=7.5, checkpointing=0.5, evaluating=2, finishing=1)
    assert result["goodput"] == round(7.5 / 14, 4) and result["wall_s"] == 14
    assert result["lost_s"] == 0 and result["recomputed_steps"] == 0 and result["interruptions"] == []
    assert result["attempts"] == 1


def test_a_lost_node_recomputes_the_steps_after_the_checkpoint(tmp_path: Path) -> None:
    """Pod a (rank 0) trains steps 1..20 (progress at 5: step 10, checkpointed then; at 7: step 20) and dies. Pod b's
    new attempt starts its process at 11, resumes from step 10, first step at 13, step 30 at 17, done at 18.
    Recomputed: steps 10..20, the 2 s they took; restarting: from the last sign of life (7) to the first step (13),
    6 s; training 2 + 4 = 6; waiting 1, starting 2, finishing 1: 18 s; lost 8."""
    a, b = Pod(tmp_path, "a", 0), Pod(tmp_path, "b", 0.5)
    a.say(2, "start", setup_s=1.0)
    a.say(2.5, "fresh_start")
    a.say(3, "first_step", step=1)
    a.say(5, "progress", step=10)
    a.say(5.4, "checkpoint", step=10, staged_at=T + 5, stage_s=0.0)
    a.say(7, "progress", step=20)
    b.say(12, "start", setup_s=1.0)
    b.say(12.5, "resumed", step=10)
    b.say(13, "first_step", step=11)
    b.say(17, "progress", step=30)
    b.say(18, "done")
    result = split(tmp_path, a, b)
    assert_split(result, waiting=1, starting=2, training=6, restarting=6, recomputed=2, finishing=1)
    assert result["lost_s"] == 8 and result["recomputed_steps"] == 10 and result["attempts"] == 2
    assert result["interruptions"] == [
        {
            "cause": "failure",
            "at": T + 7,
            "last_step": 20,
            "resumed_step": 10,
            "recomputed_steps": 10,
            "recomputed_s": 2.0,
            "paused_s": 6.0,
        }
    ]


def test_a_graceful_stop_loses_nothing(tmp_path: Path) -> None:
    """Pod a stops after step 15 (``stopping`` at 7, after 0.5 s writing the stop's checkpoint); pod b's process
    starts at 9, resumes at step 15, first step at 10, epoch ends at 11 (no evaluation time), done at 12.
    waiting 1 + 2 (7..9), starting 2 + 1, training 2 + 1.5 + 1, checkpointing 0.5, finishing 1: nothing lost."""
    a, b = Pod(tmp_path, "a", 0), Pod(tmp_path, "b", 0)
    a.say(2, "start", setup_s=1.0)
    a.say(3, "first_step", step=1)
    a.say(5, "progress", step=10)
    a.say(7, "stopping", step=15, checkpoint_wait_s=0.5, lease_state="stopped")
    b.say(10 - 0.5, "start", setup_s=0.5)
    b.say(9.5, "resumed", step=15)
    b.say(10, "first_step", step=16)
    b.say(11, "epoch", step=20, eval_s=0.0)
    b.say(12, "done")
    result = split(tmp_path, a, b)
    assert_split(result, waiting=3, starting=3, training=4.5, checkpointing=0.5, finishing=1)
    assert result["lost_s"] == 0 and result["recomputed_steps"] == 0
    assert result["interruptions"] == [
        {
            "cause": "stop",
            "at": T + 7,
            "last_step": 15,
            "resumed_step": 15,
            "recomputed_steps": 0,
            "recomputed_s": 0.0,
            "paused_s": 3.0,
        }
    ]


def test_a_frozen_peer_thawed_late_does_not_count_twice(tmp_path: Path) -> None:
    """Pod a freezes after step 20 (progress at 7); pod b's process starts at 18 (after a 10 s collective timeout),
    resumes from step 15, first step at 20, done at 30 (step 40 at 29). Thawed at 25, pod a's old attempt prints a
    step and a stop of its own: both later than pod b's start, they are ignored.
    Recomputed: steps 15..20, half of the 5..7 span (steps 10..20 in 2 s): 1 s; restarting 7..20 = 13; training
    2 + 1 + 9 = 12; waiting 1, starting 2, finishing 1."""
    a, b = Pod(tmp_path, "a", 0), Pod(tmp_path, "b", 0)
    a.say(2, "start", setup_s=1.0)
    a.say(3, "first_step", step=1)
    a.say(5, "progress", step=10)
    a.say(7, "progress", step=20)
    b.say(19, "start", setup_s=1.0)
    b.say(19.5, "resumed", step=15)
    b.say(20, "first_step", step=16)
    a.say(25, "progress", step=21)
    a.say(25.5, "stopping", step=21, checkpoint_wait_s=0.1)
    b.say(29, "progress", step=40)
    b.say(30, "done")
    result = split(tmp_path, a, b)
    assert_split(result, waiting=1, starting=2, training=12, restarting=13, recomputed=1, finishing=1)
    assert result["recomputed_steps"] == 5 and result["lost_s"] == 14
    assert [i["cause"] for i in result["interruptions"]] == ["failure"]


def test_a_failure_before_any_checkpoint_recomputes_every_earlier_attempt(tmp_path: Path) -> None:
    """Three attempts in one pod (torchrun restarts its workers): the first trains steps 1..10 and fails, the second
    resumes from step 5 and reaches 12, fails before checkpointing, the third resumes from step 5 again.
    Recomputed: steps 5..11 of the first (6 of the 10 steps of its 3..5 span: 1.2 s) and all of the second's (6..12,
    2 s): 12 steps; kept: the first's steps 1..5 (0.8 s) and the third's 6..20 (2 s)."""
    a = Pod(tmp_path, "a", 0)
    a.say(1, "start", setup_s=0.0)
    a.say(3, "first_step", step=1)
    a.say(5, "progress", step=11)  # steps 1..11: 10 steps in 2 s
    a.say(10, "start", setup_s=0.0)
    a.say(10.5, "resumed", step=5)
    a.say(13, "first_step", step=6)
    a.say(15, "progress", step=12)  # steps 6..12: 6 steps in 2 s
    a.say(20, "start", setup_s=0.0)
    a.say(20.5, "resumed", step=5)
    a.say(22, "first_step", step=6)
    a.say(24, "progress", step=20)
    a.say(25, "done")
    result = split(tmp_path, a)
    assert result["recomputed_steps"] == 6 + 6
    # first attempt: steps 5..11 of 1..11 -> 6/10 of 2 s; second: all of 6..12 (2 s)
    assert result["time_s"]["recomputed"] == pytest.approx(1.2 + 2.0, abs=0.002)
    assert result["time_s"]["training"] == pytest.approx(0.8 + 2.0, abs=0.002)
    assert [i["cause"] for i in result["interruptions"]] == ["failure", "failure"]
    assert [i["recomputed_steps"] for i in result["interruptions"]] == [6, 6]


def test_a_users_program_is_accounted_from_its_progress_lines(tmp_path: Path) -> None:
    """A program of the user's own: ``step N`` lines matched by ``GOODPUT_STEP_PATTERN``, and the one-line helper
    ``print(json.dumps({"step": N}))``, stamped when the launcher reads them. A step lower than the last one is a new
    attempt (torchrun restarted the workers); without a resume line, it resumed just before its first reported
    step."""
    base = time.time() - 50.0
    ledger = goodput.Ledger(tmp_path, "a")
    ledger.record("launch", at=base)
    watcher = goodput.LineWatcher(ledger, r"^step (\d+)")
    watcher.new_attempt(base + 1)
    for at, step in ((2, 1), (4, 11)):  # earlier lines of the first attempt, as the pattern recorded them
        ledger.record("step", at=base + at, attempt=watcher.attempt_id, step=step)
    watcher.last_step = 11
    watcher.line("loss 0.5 at step 7\n")  # not at the start of the line: no match
    watcher.line("step 6\n")  # lower: torchrun restarted the workers, they resumed from step 5
    watcher.line(json.dumps({"step": 16}) + "\n")  # the helper's line
    watcher.line(json.dumps({"event": "progress", "component": "launch", "step": 99}) + "\n")  # the launcher's own
    ledger.record("exit", command_code=0)
    assert ledger.close()
    records = goodput.read_ledgers(tmp_path)
    steps = [(r["attempt"], r["step"]) for r in records if r["kind"] == "step"]
    assert steps == [("a#1", 1), ("a#1", 11), ("a#2", 6), ("a#2", 16)]
    assert [r["attempt"] for r in records if r["kind"] == "start"] == ["a#1", "a#2"]
    result = goodput.account(records)
    assert result["recomputed_steps"] == 11 - 5 and result["attempts"] == 2
    assert result["wall_s"] == pytest.approx(50, abs=2)
    assert [i["cause"] for i in result["interruptions"]] == ["failure"]


def test_no_records_no_figure(tmp_path: Path) -> None:
    assert goodput.account([])["goodput"] is None
    assert goodput.read_ledgers(tmp_path) == []


def test_a_torn_line_is_skipped(tmp_path: Path) -> None:
    """A launcher killed mid-write leaves half a line: the rest of its ledger still counts."""
    pod = Pod(tmp_path, "a", 0)
    pod.say(1, "start", setup_s=0.0)
    pod.say(2, "first_step", step=1)
    pod.close()
    with open(pod.ledger.path, "a") as out:
        out.write('{"kind": "step", "ti')
    assert [r["kind"] for r in goodput.read_ledgers(tmp_path)] == ["launch", "start", "step"]


def test_a_program_that_reports_no_step_has_no_goodput(tmp_path: Path) -> None:
    """Output without a single step line: the time is accounted (waiting, since no attempt was seen), but a goodput
    of 0 would be a claim nobody measured: it is None."""
    pod = Pod(tmp_path, "a", 0)
    pod.text("hello")
    pod.ledger.record("exit", at=T + 5, command_code=0)
    result = split(tmp_path, pod)
    assert result["goodput"] is None and result["wall_s"] == 5 and result["attempts"] == 0


def test_one_step_line_is_no_measure_and_two_are(tmp_path: Path) -> None:
    """Training time is the time between two steps of one attempt: a program that printed its step once has no
    goodput (not 0); a second line gives the figure. The local runner says which it is."""
    pod = Pod(tmp_path / "one", "a", 0)
    pod.say(1, "start", setup_s=0.0)
    pod.say(3, step=10)
    pod.ledger.record("exit", at=T + 5, command_code=0)
    once = split(tmp_path / "one", pod)
    assert once["goodput"] is None and once["wall_s"] == 5 and once["attempts"] == 1
    line = goodput_line(goodput.metrics_fields(once))
    assert line is not None and line.startswith("goodput: not measured: no attempt printed two progress lines")

    pod = Pod(tmp_path / "two", "a", 0)
    pod.say(1, "start", setup_s=0.0)
    pod.say(3, step=10)
    pod.say(4, step=20)
    pod.ledger.record("exit", at=T + 5, command_code=0)
    twice = split(tmp_path / "two", pod)
    assert twice["goodput"] == pytest.approx(0.2) and twice["time_s"]["training"] == pytest.approx(1.0)
    assert (goodput_line(goodput.metrics_fields(twice)) or "").startswith("goodput 0.2 (1 s training of 5 s")
    assert goodput_line({"accuracy": 0.9}) is None  # a job without the launcher's accounting: no line

    pod = Pod(tmp_path / "same", "a", 0)  # two lines, one step: no step advanced between them
    pod.say(1, "start", setup_s=0.0)
    pod.say(3, step=10)
    pod.say(4, step=10)
    pod.ledger.record("exit", at=T + 5, command_code=0)
    assert split(tmp_path / "same", pod)["goodput"] is None


def test_the_local_runner_shows_the_goodput(tmp_path: Path) -> None:
    """``python -m stacks.local``'s final lines for a job (stacks/local/report.py): the goodput line from the
    launcher's fields in metrics.json; none when the launcher accounted nothing."""
    from stacks.local import report

    fields = goodput.metrics_fields(
        {
            "goodput": 0.5,
            "wall_s": 20.0,
            "lost_s": 4.0,
            "recomputed_steps": 3,
            "attempts": 2,
            "interruptions": [],
            "time_s": {
                "waiting": 2.0,
                "starting": 4.0,
                "training": 10.0,
                "restarting": 3.0,
                "recomputed": 1.0,
                "evaluating": 0.0,
            },
        }
    )
    (tmp_path / "metrics.json").write_text(json.dumps({"final_loss": 0.1, **fields, "mfu": 0.42}))
    lines = report.results(tmp_path)
    assert lines[1] == (
        "goodput 0.5 (10 s training of 20 s: waiting 2, starting 4, training 10, restarting 3, "
        "recomputed 1); lost to failures 4 s, 3 step(s) recomputed, 2 attempt(s); "
        "model FLOPs utilization 0.42"
    )
    (tmp_path / "metrics.json").write_text(json.dumps({"final_loss": 0.1}))
    assert not [line for line in report.results(tmp_path) if "goodput" in line]


def test_the_bundled_models_flops_and_utilization() -> None:
    """train.py counts the ResNet-9's FLOPs on the meta device: forward 2 x its multiply-adds, backward twice that
    (the 0.38 G multiply-adds of a 32x32 image at width 64 are 0.76 GFLOP forward, 2.27 GFLOP with the backward
    pass). MFU is achieved model FLOP/s over the peak of the devices that trained, over epochs at one world size; with
    no peak it is None and says why."""
    import cifar
    import train_outputs

    per_image = train_outputs.model_flops_per_image(cifar.ModelConfig(width=64, mean=(0.5,) * 3, std=(0.25,) * 3))
    assert per_image == pytest.approx(2.272e9, rel=0.01)
    history = [
        {"images": 1000, "train_time_s": 2.0, "world_size": 2, "world_sizes": [2], "batch_size": 100},
        {"images": 1000, "train_time_s": 1.0, "world_size": 1, "world_sizes": [2, 1], "batch_size": 100},
        {"images": 500, "train_time_s": 1.0, "world_size": 1, "world_sizes": [1], "batch_size": 100},
    ]
    found = train_outputs.flops_metrics(history, 1e9, peak_flops_per_device=1e12)
    # the mixed epoch is left out: 1500 images in 2 * 2 + 1 * 1 device-seconds
    assert found["mfu"] == pytest.approx(1500 * 1e9 / (5 * 1e12), abs=1e-4)
    assert found["model_flops_per_s"] == pytest.approx(1500 * 1e9 / 3.0)
    assert found["model_flops_per_step"] == 1e9 * 100 * 1
    none = train_outputs.flops_metrics(history, 1e9, peak_flops_per_device=None)
    assert none["mfu"] is None and "peak" in none["mfu_note"]


def test_a_users_program_that_exits_0_lost_nothing(tmp_path: Path) -> None:
    """A user's program prints ``{"step": N}`` lines and exits 0, the README's whole contract (no "done" line): the
    time after its last step is finishing, not time lost to a failure."""
    pod = Pod(tmp_path, "a", launched=0)
    pod.watcher.new_attempt(T + 2)
    pod.say(3, step=0)
    pod.say(13, step=100)
    pod.ledger.record("exit", at=T + 17, command_code=0)
    result = split(tmp_path, pod)
    assert_split(result, starting=1.0, waiting=2.0, training=10.0, finishing=4.0)
    assert result["lost_s"] == 0 and result["interruptions"] == []


def _drained_user_run(out: Path, exit_at: float, stop_at: float | None) -> dict[str, Any]:
    """A user's program printing only ``{"step": N}`` lines on two pods: a steps 0..50 from 3 to 7, 4 s apart, then its
    command exits 1 at ``exit_at`` (after a stop signal at ``stop_at``, or with none); b starts 2 s after that exit,
    steps 51..100 over the next 5 s, and exits 0 1 s later."""
    a, b = Pod(out, "a", launched=0), Pod(out, "b", launched=0)
    a.watcher.new_attempt(T + 2)
    a.say(3, step=0)
    a.say(7, step=50)
    stop = {"stop_signal": "SIGTERM", "stop_at": T + stop_at} if stop_at is not None else {"stop_signal": None}
    a.ledger.record("exit", at=T + exit_at, command_code=1, failed=False, **stop)
    b.watcher.new_attempt(T + exit_at + 2)
    b.say(exit_at + 3, step=51)
    b.say(exit_at + 7, step=100)
    b.ledger.record("exit", at=T + exit_at + 8, command_code=0, failed=False, stop_signal=None)
    return split(out, a, b)


def test_a_users_program_stopped_by_a_signal_lost_nothing(tmp_path: Path) -> None:
    """Pod a's launcher gets SIGTERM at 7.5 (a drain) and its command exits at 8 (the program saved at step 50); pod
    b starts at 10, its first step 51 at 11. The time from a's last step to its exit is the stop's checkpoint, then
    waiting until b's start: nothing lost. waiting 2 (0..2) + 2 (8..10), starting 1 (2..3) + 1 (10..11), training 4
    (3..7) + 4 (11..15), checkpointing 1 (7..8), finishing 1 (15..16)."""
    result = _drained_user_run(tmp_path, exit_at=8, stop_at=7.5)
    assert_split(result, waiting=4.0, starting=2.0, training=8.0, checkpointing=1.0, finishing=1.0)
    assert result["lost_s"] == 0
    assert [i["cause"] for i in result["interruptions"]] == ["stop"], result["interruptions"]
    # the same exit without the signal is a failure: the time from its last step to b's first is lost
    failed = _drained_user_run(tmp_path / "failed", exit_at=8, stop_at=None)
    assert failed["lost_s"] > 0 and [i["cause"] for i in failed["interruptions"]] == ["failure"], failed
    # a program that had stopped stepping (a hang: its last step at 7, steps 4 s apart) before the signal at 60
    hung = _drained_user_run(tmp_path / "hung", exit_at=61, stop_at=60)
    assert hung["lost_s"] >= 54 and [i["cause"] for i in hung["interruptions"]] == ["failure"], hung


def test_a_program_that_gave_up_and_exited_0_still_lost_its_last_stretch(tmp_path: Path) -> None:
    """The same program having written its FAILED file (the README's way for a script of one's own to give up) before
    exiting 0: its launcher records that with the exit, and the time after its last step is not finishing."""
    pod = Pod(tmp_path, "a", launched=0)
    pod.watcher.new_attempt(T + 2)
    pod.say(3, step=0)
    pod.say(13, step=100)
    pod.ledger.record("exit", at=T + 17, command_code=0, failed=True)
    result = split(tmp_path, pod)
    assert result["time_s"]["finishing"] == 0 and result["lost_s"] > 0, result


def test_a_users_script_started_again_at_the_step_it_failed_on_is_a_new_attempt(tmp_path: Path) -> None:
    """run_script's line at each start of a user's script opens an attempt: a crash after step 3, the script resumed
    from its step-2 checkpoint and printing step 3 again (no step went back) is a failure, not time the loop was held.
    T+0 launch, T+1 start, steps 1..3 at T+2..4 (crash), T+9 started again, steps 3..5 at T+10..12, exit 0 at T+13:
    waiting 1, starting 1, training 2 (1->3) + 2 (3->5) - 1 recomputed (2->3), restarting 5 (4->9) + 1 (9->10),
    finishing 1."""
    pod = Pod(tmp_path, "a", launched=0)
    pod.say(1, "attempt", component=goodput.WRAPPER)
    for at, step in ((2, 1), (3, 2), (4, 3)):
        pod.say(at, step=step)
    pod.say(9, "attempt", component=goodput.WRAPPER)
    for at, step in ((10, 3), (11, 4), (12, 5)):
        pod.say(at, step=step)
    pod.ledger.record("exit", at=T + 13, command_code=0)
    result = split(tmp_path, pod)
    assert_split(result, waiting=1.0, starting=1.0, training=3.0, restarting=6.0, recomputed=1.0, finishing=1.0)
    assert result["attempts"] == 2 and result["recomputed_steps"] == 1
    assert [i["cause"] for i in result["interruptions"]] == ["failure"]


def test_the_bundled_trainers_own_start_is_in_the_attempt_its_wrapper_opened(tmp_path: Path) -> None:
    """run_script's line, then the trainer's own start (the bundled trainer runs under it too): one attempt."""
    pod = Pod(tmp_path, "a", launched=0)
    pod.say(1, "attempt", component=goodput.WRAPPER)
    pod.say(3, "start", setup_s=2.0, world_size=1)
    pod.say(4, "first_step", step=1)
    pod.say(6, "progress", step=3)
    pod.say(6.5, "done")
    result = split(tmp_path, pod)
    assert result["attempts"] == 1
    assert_split(result, waiting=1.0, starting=3.0, training=2.0, finishing=0.5)
