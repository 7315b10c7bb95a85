"""The rendezvous in etcd: a closed one reset to a new open round (retried while etcd is unreachable), and whether
etcd answers."""

from __future__ import annotations

import time
from typing import Any

from launch_args import LaunchArgs
from launch_log import LaunchError, log
from launch_markers import read_done
from launch_supervisor import Supervisor
from rendezvous_state import RDZV_STATE_TTL_S, decode_state, encode_open_state, rendezvous_key


def make_client(host: str, port: int, read_timeout: float) -> Any:
    """A python-etcd v2 client (the library torch uses), bound to this one endpoint."""
    try:
        import etcd  # python-etcd, as in torch's etcd_rendezvous_backend
    except ImportError as exc:
        raise LaunchError("python-etcd is not installed (pip install python-etcd)") from exc
    # allow_reconnect=False: talk to exactly the given endpoint (no /v2/machines lookup, which
    # returns the advertised client URLs, e.g. http://0.0.0.0:2379 in common manifests).
    return etcd.Client(host=host, port=port, read_timeout=read_timeout, allow_reconnect=False)


def _error_classes() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(permanent, transient) etcd errors.

    python-etcd wraps socket and urllib3 failures in ``EtcdConnectionFailed``;
    any other ``EtcdException`` but key/value errors (e.g. "Bad response" while
    a member starts) is retried as well.  Key/value errors (key is a directory,
    ...) are permanent.
    """
    import etcd
    import urllib3.exceptions

    return (etcd.EtcdKeyError, etcd.EtcdValueError), (etcd.EtcdException, urllib3.exceptions.HTTPError)


def reset_closed_rendezvous(args: LaunchArgs, supervisor: Supervisor | None = None) -> bool:
    """Step 2 of the launcher (docs/explanation/failures.md, "The pod's launcher").  Returns True if the run turned
    out to be complete.

    Retries the whole read -> decide -> compare-and-swap sequence while etcd is
    unreachable, with exponential backoff, for ``--etcd-wait-seconds``.
    """
    assert args.etcd_host is not None and args.etcd_port is not None
    client = make_client(args.etcd_host, args.etcd_port, args.etcd_read_timeout)
    key = rendezvous_key(args.rdzv_id)
    permanent, transient = _error_classes()
    started = time.monotonic()
    deadline = started + args.etcd_wait_seconds
    attempt = 0
    while True:
        attempt += 1
        try:
            return _check_and_reset(client, key, args, started, attempt)
        except permanent as exc:
            raise LaunchError(f"etcd refused the request on {key}: {exc!r}") from exc
        except transient as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log(
                    "etcd_unreachable",
                    endpoint=args.rdzv_endpoint,
                    attempts=attempt,
                    waited_s=round(time.monotonic() - started, 2),
                    error=repr(exc),
                )
                raise LaunchError(
                    f"etcd at {args.rdzv_endpoint} not reachable after {args.etcd_wait_seconds:g}s: {exc!r}"
                ) from exc
            delay = min(0.25 * 2 ** (attempt - 1), 5.0, remaining)
            log("etcd_retry", endpoint=args.rdzv_endpoint, attempt=attempt, retry_in_s=round(delay, 2), error=repr(exc))
            if supervisor is not None:
                supervisor.sleep(delay)
            else:
                time.sleep(delay)


def _check_and_reset(client: Any, key: str, args: LaunchArgs, started: float, attempt: int) -> bool:
    """One read of the state key and, if it is closed, one compare-and-swap."""
    import etcd

    try:
        result = client.read(key)
    except etcd.EtcdKeyNotFound:
        log(
            "rendezvous_absent",
            key=key,
            endpoint=args.rdzv_endpoint,
            attempts=attempt,
            waited_s=round(time.monotonic() - started, 2),
            text="no rendezvous state for this run id; nothing to reset",
        )
        return False
    try:
        record = decode_state(key, str(result.value), int(result.modifiedIndex))
    except LaunchError as exc:
        # Not ours to judge: torch decides what to do with a state this launcher cannot read.
        log(
            "rendezvous_state_unreadable",
            key=key,
            etcd_index=int(result.modifiedIndex),
            error=str(exc),
            text="cannot decode the rendezvous state; not touched, torchrun will handle it",
        )
        return False
    if not record.closed:
        log(
            "rendezvous_open",
            **record.summary(),
            attempts=attempt,
            text="rendezvous is open (another node may be joining or training); not touched",
        )
        return False
    # DONE is written before the agents close the rendezvous: re-check it now that we saw "closed".
    done = read_done(args.output_dir)
    if done is not None:
        log(
            "already_complete",
            output_dir=str(args.output_dir),
            done=done,
            **record.summary(),
            text="run finished meanwhile (DONE exists); not starting torchrun",
        )
        return True
    new_round = record.round + 1
    value = encode_open_state(new_round)
    try:
        written = client.write(key, value, ttl=RDZV_STATE_TTL_S, prevIndex=record.index)
    except (etcd.EtcdCompareFailed, etcd.EtcdKeyNotFound) as exc:
        log(
            "rendezvous_reset_skipped",
            **record.summary(),
            reason=type(exc).__name__,
            text="the state changed since it was read (another pod reset it or started a new round); not touched",
        )
        return False
    log(
        "rendezvous_reset",
        **record.summary(),
        new_round=new_round,
        new_etcd_index=int(written.modifiedIndex),
        text=f"reset closed rendezvous {args.rdzv_id!r}: round {record.round} (closed) -> "
        f"round {new_round} (open); DONE not found, so the run is resumed",
    )
    return False


def etcd_reachable(args: LaunchArgs, timeout: float = 3.0) -> bool:
    """One read of the rendezvous key answers (found or not); False if etcd does not respond."""
    assert args.etcd_host is not None and args.etcd_port is not None
    import etcd

    permanent, transient = _error_classes()
    client = make_client(args.etcd_host, args.etcd_port, min(timeout, args.etcd_read_timeout))
    try:
        client.read(rendezvous_key(args.rdzv_id))
    except etcd.EtcdKeyNotFound:
        return True
    except permanent:
        return True
    except transient:
        return False
    return True
