"""Exclusive, expiring ownership of a training run's output folder: the *run lease*.

Rank 0 of each torchrun group holds it in ``<output>/lease/``, so two groups never train into one folder even when
etcd loses the rendezvous. Files: ``lease-<generation>.json`` (one :class:`LeaseRecord` per generation, the highest
current) and ``request-<token>.json`` (a group waiting). :meth:`RunLease.try_acquire` takes a free, ended, expired or
lost-member generation by an exclusive ``os.link``; :class:`LeaseKeeper` renews it from a thread of its own and
yields to a waiting group; :meth:`RunLease.begin` counts the unclean attempts of ``train.py``'s failure budget.
Plain files, atomic renames and one exclusive link work on NFS/EFS; expiry needs synchronised clocks.
The protocol and why: "The run lease" in docs/explanation/failures.md."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

LEASE_DIR_NAME = "lease"
ACTIVE = "active"
#: States a group writes when it ends in order (the next attempt is not a failure).
CLEAN_END_STATES = ("stopped", "yielded", "done", "gave_up")
#: State written when rank 0 saw its attempt fail (an exception).
FAILED = "failed"
#: Generations kept on disk (older ones are deleted by the next owner).
KEEP_GENERATIONS = 20
#: A request not refreshed for this long is ignored (its group is gone).
REQUEST_FRESH_S = 15.0

_LEASE_RE = re.compile(r"^lease-(\d{8})\.json$")
_REQUEST_RE = re.compile(r"^request-([0-9a-f]{32})\.json$")


def node_id() -> str:
    """This node's id: ``hostname/<parent pid>``.

    The parent of a worker is its torchrun agent, which lives across worker
    restarts, so all workers of one agent share the id and a new agent (a new
    pod) gets a new one.  In Kubernetes the hostname is the pod's.
    """
    return f"{socket.gethostname()}/{os.getppid()}"


@dataclass
class LeaseRecord:
    """One generation of the lease (the JSON file's content)."""

    generation: int
    token: str
    owner: str
    members: list[str]
    world_size: int
    ttl_s: float
    created_at: float
    renewed_at: float
    state: str = ACTIVE
    start_step: int | None = None
    step: int | None = None
    failures: int = 0
    previous: dict[str, Any] | None = None
    ended_at: float | None = None
    reason: str | None = None
    restart_count: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LeaseRecord:
        """Parse a record, ignoring keys this version does not know."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def expired(self, now: float) -> bool:
        """Active but not renewed within its TTL."""
        return self.state == ACTIVE and now - self.renewed_at > self.ttl_s

    def live(self, now: float) -> bool:
        """Active and renewed within its TTL."""
        return self.state == ACTIVE and not self.expired(now)

    def ended_cleanly(self) -> bool:
        """The group released the lease after an orderly end."""
        return self.state in CLEAN_END_STATES

    def summary(self) -> dict[str, Any]:
        """The fields worth logging."""
        return {
            "generation": self.generation,
            "owner": self.owner,
            "members": self.members,
            "state": self.state,
            "start_step": self.start_step,
            "step": self.step,
            "failures": self.failures,
            "renewed_at": self.renewed_at,
            "ttl_s": self.ttl_s,
        }


@dataclass(frozen=True)
class Verdict:
    """Outcome of one acquisition attempt."""

    acquired: bool
    holder: LeaseRecord | None
    why: str


def _read_json(path: Path) -> dict[str, Any] | None:
    """JSON object in ``path`` or None (missing, half-visible or not an object)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_temp(directory: Path, data: dict[str, Any]) -> Path:
    """A complete, fsynced temp file with ``data`` as JSON, world-readable."""
    fd, name = tempfile.mkstemp(prefix=".lease.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write((json.dumps(data, indent=1) + "\n").encode())
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


class RunLease:
    """Rank 0's handle on the lease of one output folder."""

    def __init__(
        self, output_dir: Path, members: list[str], ttl_s: float, world_size: int, restart_count: int = 0
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be > 0")
        self.directory = Path(output_dir) / LEASE_DIR_NAME
        self.members = list(members)
        self.owner = f"{members[0] if members else node_id()}/pid{os.getpid()}"
        self.ttl_s = float(ttl_s)
        #: Renewal cadence: a twelfth of the TTL, between 0.5 s and 5 s (a request waits at most this long).
        self.renew_every_s = max(0.5, min(5.0, self.ttl_s / 12.0))
        self.world_size = world_size
        self.restart_count = restart_count
        self.token = uuid.uuid4().hex
        self.record: LeaseRecord | None = None
        self._unreadable_since: dict[int, float] = {}
        #: Renewals (the keeper's thread) and the final release (the training loop) never interleave their writes.
        self._write_lock = threading.Lock()

    # ------------------------------------------------------------------ reading
    def generations(self) -> list[int]:
        """Generation numbers present, ascending."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_LEASE_RE.match, names) if m)

    def path(self, generation: int) -> Path:
        """File of ``generation``."""
        return self.directory / f"lease-{generation:08d}.json"

    def read(self, generation: int) -> LeaseRecord | None:
        """Record of ``generation`` (None if it cannot be read)."""
        data = _read_json(self.path(generation))
        if data is None:
            return None
        try:
            return LeaseRecord.from_dict(data)
        except TypeError:
            return None

    def current(self) -> tuple[int, LeaseRecord | None]:
        """(highest generation, its record); (0, None) when there is none."""
        gens = self.generations()
        if not gens:
            return 0, None
        return gens[-1], self.read(gens[-1])

    # ---------------------------------------------------------------- acquiring
    def try_acquire(self, now: float | None = None) -> Verdict:
        """One attempt to take the lease (never blocks)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        generation, holder = self.current()
        # read after the holder: a release read here ended before the new generation's creation time
        now = time.time() if now is None else now
        if generation and holder is None:
            # The newest generation exists but cannot be read: wait, but no longer than a TTL.
            first_seen = self._unreadable_since.setdefault(generation, time.monotonic())
            if time.monotonic() - first_seen < self.ttl_s:
                return Verdict(False, None, f"generation {generation} unreadable")
        if generation and holder is None:
            why = f"generation {generation} unreadable for {self.ttl_s:g}s"
        elif holder is not None and holder.state == ACTIVE:
            shared = sorted(set(holder.members) & set(self.members))
            if shared:
                why = f"previous attempt of this group's nodes ({', '.join(shared)})"
            elif holder.expired(now):
                why = f"expired {now - holder.renewed_at:.1f}s after its last renewal (ttl {holder.ttl_s:g}s)"
            else:
                return Verdict(False, holder, "held by another live group")
        elif holder is not None:
            why = f"released ({holder.state})"
        else:
            why = "no lease yet"
        record = LeaseRecord(
            generation=generation + 1,
            token=self.token,
            owner=self.owner,
            members=self.members,
            world_size=self.world_size,
            ttl_s=self.ttl_s,
            created_at=now,
            renewed_at=now,
            previous=holder.summary() if holder is not None else None,
            restart_count=self.restart_count,
        )
        tmp = _write_temp(self.directory, asdict(record))
        try:
            os.link(tmp, self.path(record.generation))
        except FileExistsError:
            return Verdict(False, None, f"lost the race for generation {record.generation}")
        finally:
            tmp.unlink(missing_ok=True)
        self.record = record
        self._prune(record.generation)
        self._drop_requests_of_members()
        return Verdict(True, holder, why)

    def begin(self, start_step: int) -> int:
        """Record where this attempt starts; return consecutive unclean attempts without progress.

        The previous generation ended uncleanly (``failed``, or still
        ``active`` when it was taken over) and started from the same
        checkpoint step as this attempt: one more failure in a row.
        """
        record = self._require()
        previous = record.previous
        failures = 0
        if previous is not None and previous.get("state") not in CLEAN_END_STATES:
            if previous.get("start_step") == start_step:
                failures = int(previous.get("failures") or 0) + 1
            else:
                failures = 1
        record.start_step = start_step
        record.step = start_step
        record.failures = failures
        self._write()
        return failures

    # ---------------------------------------------------------------- renewing
    def renew(self, step: int) -> str:
        """Renew now; return ``"ok"``, ``"lost"`` (a newer generation exists) or ``"yield"``.

        A generation already released is left as it is (``"ok"``, nothing written)."""
        record = self._require()
        with self._write_lock:
            if record.state != ACTIVE:
                return "ok"
            if self.generations()[-1:] != [record.generation]:
                return "lost"
            on_disk = self.read(record.generation)
            if on_disk is not None and on_disk.token != record.token:
                return "lost"
            record.renewed_at = time.time()
            record.step = step
            self._write()
        return "yield" if self.requests() else "ok"

    def still_owner(self) -> bool:
        """No newer generation exists (checked before writing a checkpoint)."""
        record = self._require()
        return self.generations()[-1:] == [record.generation]

    def release(self, state: str, step: int | None = None, reason: str | None = None) -> None:
        """Write the final state of this generation (only while it is the newest one)."""
        record = self.record
        if record is None:
            return
        # A renewal stuck on a dead volume holds the lock: give up after a TTL (the lease then expires on its own)
        # rather than keep this rank from the hand-off its peers wait for.
        if not self._write_lock.acquire(timeout=self.ttl_s):
            return
        try:
            if record.state != ACTIVE or not self.still_owner():
                return  # a newer generation exists: this one's story ended when it was taken over
            record.state = state
            record.ended_at = time.time()
            record.reason = reason
            if step is not None:
                record.step = step
            self._write()
        finally:
            self._write_lock.release()

    # ---------------------------------------------------------------- requests
    def request_path(self) -> Path:
        """This group's request file."""
        return self.directory / f"request-{self.token}.json"

    def post_request(self, holder: LeaseRecord | None) -> None:
        """Ask the owner to let this group in (refreshed on every call)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        data = {
            "token": self.token,
            "members": self.members,
            "owner": self.owner,
            "posted_at": time.time(),
            "waiting_for": holder.generation if holder else None,
        }
        tmp = _write_temp(self.directory, data)
        os.replace(tmp, self.request_path())

    def withdraw_request(self) -> None:
        """Remove this group's request."""
        self.request_path().unlink(missing_ok=True)

    def requests(self) -> list[dict[str, Any]]:
        """Fresh requests of *other* groups (no shared member, posted within REQUEST_FRESH_S)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        now = time.time()
        found = []
        for name in names:
            match = _REQUEST_RE.match(name)
            if not match or match.group(1) == self.token:
                continue
            data = _read_json(self.directory / name)
            if data is None or set(data.get("members", [])) & set(self.members):
                continue
            if now - float(data.get("posted_at", 0)) <= REQUEST_FRESH_S:
                found.append(data)
        return found

    # ---------------------------------------------------------------- internals
    def _require(self) -> LeaseRecord:
        if self.record is None:
            raise RuntimeError("the lease is not held")
        return self.record

    def _write(self) -> None:
        record = self._require()
        tmp = _write_temp(self.directory, asdict(record))
        os.replace(tmp, self.path(record.generation))

    def _prune(self, newest: int) -> None:
        for generation in self.generations():
            if generation <= newest - KEEP_GENERATIONS:
                self.path(generation).unlink(missing_ok=True)
        for stale in self.directory.glob(".lease.*.tmp"):
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > 3600:
                    stale.unlink()

    def _drop_requests_of_members(self) -> None:
        """Requests posted by any of our nodes are satisfied now (they are in this group)."""
        for path in self.directory.glob("request-*.json"):
            data = _read_json(path)
            if data is not None and set(data.get("members", [])) & set(self.members):
                path.unlink(missing_ok=True)


class LeaseKeeper:
    r"""Renews a held lease from a thread of its own while the training loop :meth:`beat`\ s, so a stalled write to
    the shared volume does not hold rank 0 in its loop; a loop silent for a TTL stops the renewals and its lease
    expires ("The run lease" in docs/explanation/failures.md)."""

    def __init__(self, lease: RunLease) -> None:
        self.lease = lease
        self._step = 0
        self._beat = time.monotonic()
        self._seen: list[str] = []  # outcomes other than "ok", in order, each once
        self._reported = 0
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)

    def start(self) -> LeaseKeeper:
        """Start renewing (the lease must be held)."""
        self.lease._require()
        self._thread.start()
        return self

    def beat(self, step: int) -> None:
        """The training loop is alive at ``step`` (cheap: no I/O)."""
        self._step = step
        self._beat = time.monotonic()

    def news(self) -> list[str]:
        """Outcomes (``"yield"``, ``"lost"``) learned since the last call; raises if a renewal failed."""
        if self._error is not None:
            raise RuntimeError(f"renewing the run lease failed: {self._error!r}") from self._error
        found = self._seen[self._reported :]
        self._reported += len(found)
        return found

    @property
    def lost(self) -> bool:
        """A renewal found a newer generation: another group owns the run."""
        return "lost" in self._seen

    def stop(self) -> None:
        """No further renewal starts (one in progress finishes; the thread is a daemon)."""
        self._stop.set()

    def _run(self) -> None:
        failing_since: float | None = None
        while not self._stop.wait(self.lease.renew_every_s):
            if time.monotonic() - self._beat > self.lease.ttl_s:
                continue  # the loop is stuck: let the lease expire
            try:
                outcome = self.lease.renew(self._step)
            except Exception as exc:
                # A volume error (ESTALE, EIO on NFS) may pass: keep trying while half the TTL is left, then report
                # it to the loop through news(), which ends the attempt.
                failing_since = time.monotonic() if failing_since is None else failing_since
                if time.monotonic() - failing_since >= self.lease.ttl_s / 2:
                    self._error = exc
                    return
                continue
            failing_since = None
            if outcome != "ok" and outcome not in self._seen:
                self._seen.append(outcome)
            if outcome == "lost":
                return
