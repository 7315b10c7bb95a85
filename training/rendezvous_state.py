"""The rendezvous state torch's etcd-v2 backend stores: its key, read without torch, and a fresh open one written."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import importlib
import io
import pickle
from dataclasses import dataclass
from typing import Any

from launch_log import LaunchError

#: Where torch's etcd-v2 backend keeps rendezvous states (``etcd_rendezvous_backend.create_backend``).
RDZV_KEY_PREFIX = "/torch/elastic/rendezvous"
#: TTL torch gives the state key (``EtcdRendezvousBackend._DEFAULT_TTL``).
RDZV_STATE_TTL_S = 7200
#: Module of the pickled state classes.
TORCH_RDZV_MODULE = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"


def rendezvous_key(rdzv_id: str) -> str:
    """The etcd v2 key torch uses for the state of run ``rdzv_id``."""
    return f"{RDZV_KEY_PREFIX}/{rdzv_id}"


class _StateView:
    """Stand-in for torch's ``_RendezvousState`` (attributes filled in by unpickling)."""

    round: int
    complete: bool
    closed: bool
    participants: dict[Any, int]
    wait_list: set[Any]
    last_heartbeats: dict[Any, dt.datetime]


class _NodeView:
    """Stand-in for torch's ``_NodeDesc`` (``addr``, ``pid``, ``local_id``)."""

    addr: str
    pid: int
    local_id: int


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    (TORCH_RDZV_MODULE, "_RendezvousState"): _StateView,
    (TORCH_RDZV_MODULE, "_NodeDesc"): _NodeView,
    ("datetime", "datetime"): dt.datetime,
    ("datetime", "timezone"): dt.timezone,
    ("datetime", "timedelta"): dt.timedelta,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
}


class _StateUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the globals a rendezvous state contains."""

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"unexpected global {module}.{name} in a rendezvous state") from None


@dataclass(frozen=True)
class RendezvousRecord:
    """One read of the state key: what torch stored and the etcd index to compare against."""

    key: str
    index: int
    closed: bool
    round: int
    complete: bool
    participants: int
    wait_list: int
    newest_heartbeat: dt.datetime | None

    def summary(self) -> dict[str, Any]:
        """JSON-friendly fields for log lines."""
        age = None
        if self.newest_heartbeat is not None:
            age = round((dt.datetime.now(dt.UTC) - self.newest_heartbeat).total_seconds(), 1)
        return {
            "key": self.key,
            "etcd_index": self.index,
            "closed": self.closed,
            "round": self.round,
            "complete": self.complete,
            "participants": self.participants,
            "wait_list": self.wait_list,
            "newest_heartbeat_age_s": age,
        }


def decode_state(key: str, value: str, index: int) -> RendezvousRecord:
    """Decode ``base64(pickle(_RendezvousState))``; raise :class:`LaunchError` if it is not one."""
    try:
        bits = base64.b64decode(value.encode())
        state = _StateUnpickler(io.BytesIO(bits)).load()
    except (binascii.Error, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
        raise LaunchError(f"{key}: not a torch rendezvous state: {exc!r}") from exc
    if not isinstance(state, _StateView) or not isinstance(getattr(state, "closed", None), bool):
        raise LaunchError(f"{key}: not a torch rendezvous state (no 'closed' flag)")
    heartbeats = [t for t in getattr(state, "last_heartbeats", {}).values() if isinstance(t, dt.datetime)]
    return RendezvousRecord(
        key=key,
        index=index,
        closed=state.closed,
        round=int(getattr(state, "round", 0)),
        complete=bool(getattr(state, "complete", False)),
        participants=len(getattr(state, "participants", {})),
        wait_list=len(getattr(state, "wait_list", ())),
        newest_heartbeat=max(heartbeats) if heartbeats else None,
    )


def encode_open_state(round_number: int) -> str:
    """A fresh open state at ``round_number``, encoded exactly as torch's etcd-v2 backend writes it."""
    try:
        module = importlib.import_module(TORCH_RDZV_MODULE)
        state = module._RendezvousState()
    except (ImportError, AttributeError) as exc:
        raise LaunchError(f"cannot build a rendezvous state with this torch: {exc!r}") from exc
    state.round = round_number
    return base64.b64encode(pickle.dumps(state)).decode()
