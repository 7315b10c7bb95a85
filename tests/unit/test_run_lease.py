"""The run lease's rules (training/run_lease.py), called directly on a temporary folder.

The real-process scenarios (tests/real/test_training_faults_real.py) show the lease
at work inside train.py; these check each rule on its own, including the ones
that timing makes hard to reach there: two contenders for one generation, an
unreadable generation, the counting of failed attempts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"
if str(TRAINING_DIR) not in sys.path:
    sys.path.insert(0, str(TRAINING_DIR))

import run_lease  # noqa: E402
from run_lease import RunLease  # noqa: E402

from tests.wait import patient  # noqa: E402

#: The keeper's renewal cadence in the tests of its thread: the product's floor (0.5 s, :attr:`RunLease.renew_every_s`)
#: spares a real volume; the keeper's rules do not depend on it, and each test's waits are counted in cadences.
FAST_RENEWALS_S = 0.1


def lease(out: Path, *members: str, ttl: float = 60.0, renew_every: float | None = None) -> RunLease:
    """A lease handle for a group of ``members`` (renewed every ``renew_every`` seconds when given)."""
    handle = RunLease(out, list(members), ttl_s=ttl, world_size=len(members))
    if renew_every is not None:
        handle.renew_every_s = renew_every
    return handle


def record(out: Path, generation: int) -> dict[str, object]:
    """The JSON of one generation."""
    data: dict[str, object] = json.loads((out / "lease" / f"lease-{generation:08d}.json").read_text())
    return data


def test_first_group_acquires_and_a_second_waits_until_release(tmp_path: Path) -> None:
    a, b = lease(tmp_path, "host-a/1"), lease(tmp_path, "host-b/1")
    got = a.try_acquire()
    assert got.acquired and got.why == "no lease yet" and a.record is not None and a.record.generation == 1
    verdict = b.try_acquire()
    assert not verdict.acquired and verdict.holder is not None and verdict.holder.members == ["host-a/1"]
    a.release("stopped", step=7)
    assert record(tmp_path, 1)["state"] == "stopped" and record(tmp_path, 1)["step"] == 7
    got = b.try_acquire()
    assert got.acquired and got.why == "released (stopped)" and b.record is not None and b.record.generation == 2


def test_a_group_sharing_a_node_takes_over_at_once_and_counts_a_failure(tmp_path: Path) -> None:
    """The old group lost a node to the new one, so it cannot train any more; its end was unclean."""
    old = lease(tmp_path, "host-a/1", "host-b/1")
    assert old.try_acquire().acquired
    assert old.begin(start_step=23) == 0
    survivor = lease(tmp_path, "host-b/1")
    got = survivor.try_acquire()
    assert got.acquired and got.why.startswith("previous attempt of this group's nodes (host-b/1)")
    assert survivor.begin(start_step=23) == 1  # failed without progress from step 23
    again = lease(tmp_path, "host-b/1")
    assert again.try_acquire().acquired and again.begin(start_step=23) == 2
    progressed = lease(tmp_path, "host-b/1")
    assert progressed.try_acquire().acquired and progressed.begin(start_step=40) == 1  # new streak
    progressed.release("stopped")
    clean = lease(tmp_path, "host-c/1")
    assert clean.try_acquire().acquired and clean.begin(start_step=40) == 0  # a clean end resets


def test_a_live_foreign_lease_expires_after_its_ttl(tmp_path: Path) -> None:
    holder = lease(tmp_path, "host-a/1", ttl=5.0)
    assert holder.try_acquire().acquired
    other = lease(tmp_path, "host-b/1")
    now = time.time()
    assert not other.try_acquire(now=now + 4.0).acquired
    got = other.try_acquire(now=now + 6.0)
    assert got.acquired and got.why.startswith("expired")


def test_one_winner_per_generation(tmp_path: Path) -> None:
    """Two contenders that both saw generation 1 released: the exclusive link admits one."""
    first = lease(tmp_path, "host-a/1")
    assert first.try_acquire().acquired
    first.release("done")
    x, y = lease(tmp_path, "host-x/1"), lease(tmp_path, "host-y/1")
    seen = x.current()
    real_current = y.current
    y.current = lambda: seen  # type: ignore[method-assign]  # y decides on the same stale view as x
    assert x.try_acquire().acquired
    lost = y.try_acquire()
    assert not lost.acquired and lost.why == "lost the race for generation 2"
    y.current = real_current  # type: ignore[method-assign]
    assert not y.try_acquire().acquired  # generation 2 is x's, live
    assert sorted(p.name for p in (tmp_path / "lease").iterdir()) == ["lease-00000001.json", "lease-00000002.json"]


def test_an_unreadable_generation_blocks_for_one_ttl_only(tmp_path: Path) -> None:
    (tmp_path / "lease").mkdir()
    (tmp_path / "lease" / "lease-00000003.json").write_text("{not json")
    waiting = lease(tmp_path, "host-a/1", ttl=0.5)
    assert not waiting.try_acquire().acquired
    time.sleep(0.6)
    got = waiting.try_acquire()
    assert got.acquired and got.why == "generation 3 unreadable for 0.5s"
    assert waiting.record is not None and waiting.record.generation == 4


def test_renewal_reports_a_yield_request_or_a_lost_lease(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1", ttl=60.0)
    assert owner.try_acquire().acquired
    assert owner.renew(step=3) == "ok" and record(tmp_path, 1)["step"] == 3
    waiter = lease(tmp_path, "host-b/1")
    assert not waiter.try_acquire().acquired
    waiter.post_request(owner.record)
    own_node = lease(tmp_path, "host-a/1")
    own_node.post_request(owner.record)  # a request from one of the owner's own nodes is not a group
    assert [r["members"] for r in owner.requests()] == [["host-b/1"]]
    assert owner.renew(step=4) == "yield"
    stale = json.loads(waiter.request_path().read_text())
    stale["posted_at"] = time.time() - run_lease.REQUEST_FRESH_S - 1
    waiter.request_path().write_text(json.dumps(stale))
    own_node.withdraw_request()
    assert owner.renew(step=5) == "ok"  # the requester stopped refreshing: it is gone
    # Someone created the next generation: the owner has lost the run and must not write.
    (tmp_path / "lease" / "lease-00000002.json").write_text(json.dumps(record(tmp_path, 1) | {"generation": 2}))
    assert owner.renew(step=6) == "lost" and not owner.still_owner()
    owner.release("stopped", step=6)
    assert record(tmp_path, 1)["state"] == "active"  # no rewrite of a superseded generation


def test_the_new_owner_drops_its_own_requests_and_prunes_old_generations(tmp_path: Path) -> None:
    out = tmp_path
    for generation in range(1, run_lease.KEEP_GENERATIONS + 3):
        holder = lease(out, f"host-{generation}/1")
        assert holder.try_acquire().acquired
        holder.release("stopped")
    waiter = lease(out, "host-z/1")
    waiter.post_request(None)
    joined = lease(out, "host-z/1", "host-y/1")
    assert joined.try_acquire().acquired
    assert not list((out / "lease").glob("request-*.json"))
    generations = joined.generations()
    assert len(generations) == run_lease.KEEP_GENERATIONS and generations[-1] == run_lease.KEEP_GENERATIONS + 3


def test_records_are_world_readable_and_complete_when_they_appear(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1")
    assert owner.try_acquire().acquired
    path = tmp_path / "lease" / "lease-00000001.json"
    assert path.stat().st_mode & 0o044 == 0o044  # other pods may run as other users
    assert not [p for p in os.listdir(tmp_path / "lease") if p.endswith(".tmp")]
    assert run_lease.LeaseRecord.from_dict(record(tmp_path, 1) | {"unknown": 1}).owner.startswith("host-a/1/pid")


def wait_until(condition: object, timeout: float | None = None) -> None:
    """Poll ``condition()`` until true (the keeper's thread runs on its own clock), by default
    ``patient(10)`` seconds."""
    deadline = time.monotonic() + (patient(10.0) if timeout is None else timeout)
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_the_keeper_renews_from_its_thread_while_the_loop_beats_and_reports_each_outcome_once(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1", ttl=6.0, renew_every=FAST_RENEWALS_S)
    assert owner.try_acquire().acquired
    keeper = run_lease.LeaseKeeper(owner).start()
    try:
        keeper.beat(7)
        wait_until(lambda: record(tmp_path, 1)["step"] == 7)
        assert keeper.news() == []
        waiter = lease(tmp_path, "host-b/1")
        waiter.post_request(owner.record)
        wait_until(lambda: "yield" in keeper._seen)
        assert keeper.news() == ["yield"] and keeper.news() == []
        assert not keeper.lost
    finally:
        keeper.stop()


def test_the_keeper_lets_the_lease_expire_when_the_loop_stops_beating(tmp_path: Path) -> None:
    # renewals every 0.1 s; a loop silent for 0.5 s is stuck: the last renewal starts before 0.6 s
    owner = lease(tmp_path, "host-a/1", ttl=0.5, renew_every=FAST_RENEWALS_S)
    assert owner.try_acquire().acquired
    keeper = run_lease.LeaseKeeper(owner).start()
    try:
        keeper.beat(1)
        time.sleep(1.5)  # 0.9 s after the last renewal could start
        renewed = float(record(tmp_path, 1)["renewed_at"])  # type: ignore[arg-type]
        time.sleep(0.5)  # five renewal periods
        assert float(record(tmp_path, 1)["renewed_at"]) == renewed  # type: ignore[arg-type]
        assert lease(tmp_path, "host-b/1").try_acquire().acquired  # expired: another group may take the run
    finally:
        keeper.stop()


def test_a_release_is_never_overwritten_by_a_renewal_in_flight(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1", ttl=6.0, renew_every=FAST_RENEWALS_S)
    assert owner.try_acquire().acquired
    keeper = run_lease.LeaseKeeper(owner).start()
    try:
        for step in range(10):  # renewals (every 0.1 s: five of them) race the release below
            keeper.beat(step)
            time.sleep(0.05)
        owner.release("stopped", step=10)
        time.sleep(0.3)  # three renewal periods after the release
        assert record(tmp_path, 1)["state"] == "stopped" and record(tmp_path, 1)["step"] == 10
    finally:
        keeper.stop()


def test_a_failed_renewal_ends_the_attempt_through_the_loop_once_it_kept_failing(tmp_path: Path) -> None:
    """One volume error may pass (NFS: ESTALE, EIO); renewals that keep failing for half the TTL end the attempt."""
    # renewals every 0.1 s; fails after 0.3 s of failures (half the TTL)
    owner = lease(tmp_path, "host-a/1", ttl=0.6, renew_every=FAST_RENEWALS_S)
    assert owner.try_acquire().acquired
    keeper = run_lease.LeaseKeeper(owner).start()
    try:
        (tmp_path / "lease").rename(tmp_path / "gone")  # the volume fails under the lease (modes: tests run as root)
        (tmp_path / "lease").write_text("not a folder")
        failed_from = time.monotonic()
        for step in range(100):  # the loop keeps beating
            keeper.beat(step)
            if keeper._error is not None:
                break
            time.sleep(0.05)
        assert keeper._error is not None and time.monotonic() - failed_from >= 0.3  # not at the first error
        with pytest.raises(RuntimeError, match="renewing the run lease failed"):
            keeper.news()
    finally:
        keeper.stop()


def test_a_transient_renewal_error_passes(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1", ttl=6.0, renew_every=FAST_RENEWALS_S)
    assert owner.try_acquire().acquired
    original, calls = owner.renew, []

    def flaky(step: int) -> str:
        calls.append(step)
        if len(calls) == 1:
            raise OSError(116, "Stale file handle")
        return original(step)

    owner.renew = flaky  # type: ignore[method-assign]
    keeper = run_lease.LeaseKeeper(owner).start()
    try:
        for step in range(100):  # until two renewals after the failed one (0.3 s; at most 5 s)
            keeper.beat(step)
            time.sleep(0.05)
            if len(calls) >= 3:
                break
        assert len(calls) >= 2 and keeper.news() == []  # the next renewal went through; nothing reported
        assert record(tmp_path, 1)["step"] in calls[1:]  # written by a renewal after the failed one
    finally:
        keeper.stop()


def test_a_release_gives_up_on_a_renewal_stuck_on_a_dead_volume(tmp_path: Path) -> None:
    owner = lease(tmp_path, "host-a/1", ttl=0.3)
    assert owner.try_acquire().acquired
    owner._write_lock.acquire()  # a renewal that never returns holds it
    started = time.monotonic()
    owner.release("done", step=3)
    assert 0.3 <= time.monotonic() - started < 4.3  # one TTL, then on to the hand-off
    assert record(tmp_path, 1)["state"] == "active"  # nothing written: the lease expires on its own
