"""Container entrypoint of a training pod: skip a finished run, reopen a closed rendezvous, run torchrun.

It forwards the pod's stop signal to torchrun, records ``DIR/DONE`` and the goodput (:mod:`goodput`) when the command
exits 0, and prints one JSON object a line. Usage and design: "The pod's launcher" in docs/explanation/failures.md.

Exit codes (the pod's):

* 0 -- the run is complete: the command exited 0, or ``DIR/DONE`` exists, whatever the command returned;
* 143 (:data:`EXIT_STOPPED`) -- a stop signal arrived before the run completed (podFailurePolicy: Ignore);
* 3 (:data:`EXIT_RUN_FAILED`) -- ``DIR/FAILED`` exists: the run gave up (podFailurePolicy: FailJob);
* 69 (:data:`EXIT_RENDEZVOUS_LOST`) -- the command failed and etcd is unreachable right after: the rendezvous went
  with etcd (rescheduled, its node drained); the next pod waits for etcd, fails (1) if it stays away (Ignore);
* 2 -- usage error (FailJob); 127 -- the command could not be started; 1 -- etcd unreachable within
  ``--etcd-wait-seconds``, ``DIR/DONE`` unreadable, or no torch to encode a new state;
* otherwise the command's own exit code (128 + N if it died of signal N)."""

from __future__ import annotations

import argparse
import base64
import binascii
import datetime as dt
import importlib
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import goodput  # noqa: E402  (needs the sys.path entry above)
import metrics  # noqa: E402
from run_script import FAILED_MARKER, LAUNCHER_ENV  # noqa: E402  (the marker and the variable the two share)

#: Where torch's etcd-v2 backend keeps rendezvous states (``etcd_rendezvous_backend.create_backend``).
RDZV_KEY_PREFIX = "/torch/elastic/rendezvous"
#: TTL torch gives the state key (``EtcdRendezvousBackend._DEFAULT_TTL``).
RDZV_STATE_TTL_S = 7200
#: Module of the pickled state classes.
TORCH_RDZV_MODULE = "torch.distributed.elastic.rendezvous.dynamic_rendezvous"
ETCD_DEFAULT_PORT = 2379
DONE_MARKER = "DONE"
# FAILED_MARKER: written by train.py or run_script.py when the run gives up; this launcher then exits 3.
# LAUNCHER_ENV: set in the command's environment, so run_script.py's crash-loop budget applies only under it.
#: Beside this file: a job's command runs its script through it (``torchrun ... run_script.py SCRIPT``), which ends
#: the process without the interpreter's finalisation, where torch's threads can abort a finished rank.
RUN_SCRIPT = "run_script.py"
BACKENDS = ("etcd-v2", "c10d")
#: Signals that ask the pod to stop (forwarded once to the command).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_RUN_FAILED = 3
#: torchrun failed while etcd was unreachable: the rendezvous was lost with it (etcd rescheduled,
#: its node drained).  Not the run's fault; a replacement pod waits for etcd (``--etcd-wait-seconds``)
#: and exits 1 if it does not come back.  (EX_UNAVAILABLE.)
EXIT_RENDEZVOUS_LOST = 69
EXIT_EXEC_FAILED = 127
EXIT_STOPPED = 143


# --------------------------------------------------------------------------- #
# Logging and errors
# --------------------------------------------------------------------------- #
#: One line at a time on stdout: the launcher's own lines and the command's, which it forwards.
_STDOUT_LOCK = threading.Lock()


def log(event: str, at: float | None = None, **fields: Any) -> None:
    """Print one JSON object (``{"event": ..., "component": "launch", ...}``) on stdout; ``at``: its time (default
    now)."""
    record = {"event": event, "component": "launch", "time": round(time.time() if at is None else at, 3), **fields}
    with _STDOUT_LOCK:
        print(json.dumps(record, default=str), flush=True)


class UsageError(Exception):
    """Bad command line (exit code 2)."""


class LaunchError(Exception):
    """etcd unreachable or the stored state is unusable (exit code 1)."""


class StopRequested(Exception):
    """A stop signal arrived before the command was started (exit code 143)."""


class _Parser(argparse.ArgumentParser):
    """ArgumentParser that raises :class:`UsageError` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


# --------------------------------------------------------------------------- #
# Command line
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class LaunchArgs:
    """Validated command line."""

    output_dir: Path
    rdzv_backend: str
    rdzv_endpoint: str | None
    rdzv_id: str
    etcd_host: str | None
    etcd_port: int | None
    etcd_wait_seconds: float
    etcd_read_timeout: float
    command: list[str]


def build_parser() -> argparse.ArgumentParser:
    """The launcher's own options (everything before ``--``)."""
    parser = _Parser(
        prog="launch.py",
        usage="%(prog)s --output-dir DIR --rdzv-backend {etcd-v2,c10d} --rdzv-endpoint HOST[:PORT] "
        "--rdzv-id ID [options] -- torchrun ...",
        description="Skip a finished run, reset a closed etcd-v2 rendezvous, then exec the command after --.",
    )
    parser.add_argument(
        "--output-dir", required=True, type=Path, help="the run's shared output folder; DIR/DONE marks a finished run"
    )
    parser.add_argument(
        "--rdzv-backend", required=True, choices=BACKENDS, help="the torchrun rendezvous backend of the command"
    )
    parser.add_argument(
        "--rdzv-endpoint", default=None, help="etcd HOST[:PORT] (port 2379 if omitted); required for etcd-v2"
    )
    parser.add_argument("--rdzv-id", required=True, help="the torchrun --rdzv-id of the run")
    parser.add_argument(
        "--etcd-wait-seconds",
        type=float,
        default=120.0,
        help="keep retrying an unreachable etcd this long (default 120)",
    )
    parser.add_argument(
        "--etcd-read-timeout", type=float, default=10.0, help="timeout of one etcd request in seconds (default 10)"
    )
    return parser


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """``host[:port]`` (or ``[v6]:port``) -> (host, port); port 2379 when omitted, like torch."""
    text = endpoint.strip()
    if not text:
        raise UsageError("--rdzv-endpoint is empty")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise UsageError(f"bad --rdzv-endpoint {endpoint!r}")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        raise UsageError(f"bad --rdzv-endpoint {endpoint!r}: no host")
    if not port_text:
        return host, ETCD_DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"bad --rdzv-endpoint {endpoint!r}: port must be 1..65535")
    return host, int(port_text)


def option_values(command: Sequence[str], names: Sequence[str]) -> list[str]:
    """Values of ``--name VALUE`` / ``--name=VALUE`` for any of ``names`` in ``command``."""
    values = []
    for i, token in enumerate(command):
        for name in names:
            if token == name and i + 1 < len(command):
                values.append(command[i + 1])
            elif token.startswith(name + "="):
                values.append(token[len(name) + 1 :])
    return values


def torchrun_part(command: Sequence[str]) -> list[str]:
    """The command up to (excluding) the first ``*.py`` token: torchrun's own arguments."""
    for i, token in enumerate(command):
        if token.endswith(".py") and i > 0:
            return list(command[:i])
    return list(command)


def check_consistency(args: LaunchArgs) -> None:
    """Refuse a command whose rendezvous flags or --output-dir contradict the launcher's."""
    launcher = torchrun_part(args.command)
    for value in option_values(launcher, ("--rdzv-id", "--rdzv_id")):
        if value != args.rdzv_id:
            raise UsageError(f"the command uses --rdzv-id={value} but the launcher got --rdzv-id={args.rdzv_id}")
    for value in option_values(launcher, ("--rdzv-backend", "--rdzv_backend")):
        if value != args.rdzv_backend:
            raise UsageError(
                f"the command uses --rdzv-backend={value} but the launcher got --rdzv-backend={args.rdzv_backend}"
            )
    if args.rdzv_backend == "etcd-v2":
        for value in option_values(launcher, ("--rdzv-endpoint", "--rdzv_endpoint")):
            if parse_endpoint(value) != (args.etcd_host, args.etcd_port):
                raise UsageError(
                    f"the command uses --rdzv-endpoint={value} but the launcher got "
                    f"--rdzv-endpoint={args.rdzv_endpoint}"
                )
    script_args = args.command[len(launcher) :]
    for value in option_values(script_args, ("--output-dir",)):
        if Path(value).resolve() != args.output_dir.resolve():
            raise UsageError(
                f"the training command writes to --output-dir={value} but the launcher checks {args.output_dir}"
            )


def parse_args(argv: Sequence[str]) -> LaunchArgs:
    """Split ``argv`` at the first ``--`` and validate both halves; raise :class:`UsageError`."""
    argv = list(argv)
    if "--" not in argv:
        raise UsageError("missing '--' before the command to run (e.g. -- torchrun ... /app/train.py ...)")
    cut = argv.index("--")
    own, command = argv[:cut], argv[cut + 1 :]
    ns = build_parser().parse_args(own)
    if not command:
        raise UsageError("no command after '--'")
    if not ns.rdzv_id.strip():
        raise UsageError("--rdzv-id is empty")
    if "/" in ns.rdzv_id:
        raise UsageError("--rdzv-id must not contain '/' (it is an etcd key name)")
    if ns.etcd_wait_seconds < 0 or ns.etcd_read_timeout <= 0:
        raise UsageError("--etcd-wait-seconds must be >= 0 and --etcd-read-timeout > 0")
    host: str | None = None
    port: int | None = None
    if ns.rdzv_backend == "etcd-v2":
        if not ns.rdzv_endpoint:
            raise UsageError("--rdzv-endpoint is required with --rdzv-backend etcd-v2")
        host, port = parse_endpoint(ns.rdzv_endpoint)
    args = LaunchArgs(
        output_dir=ns.output_dir,
        rdzv_backend=ns.rdzv_backend,
        rdzv_endpoint=ns.rdzv_endpoint,
        rdzv_id=ns.rdzv_id,
        etcd_host=host,
        etcd_port=port,
        etcd_wait_seconds=ns.etcd_wait_seconds,
        etcd_read_timeout=ns.etcd_read_timeout,
        command=command,
    )
    check_consistency(args)
    return args


# --------------------------------------------------------------------------- #
# DONE marker
# --------------------------------------------------------------------------- #
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


def read_failed(output_dir: Path) -> dict[str, Any] | None:
    """Contents of ``DIR/FAILED`` (``{"text": ...}``, its first 500 characters, if not JSON: a user's program may
    write its reason as plain text), or ``None`` when the run has not given up."""
    try:
        text = (output_dir / FAILED_MARKER).read_text(errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {"text": text.strip()[:500]} if text.strip() else {}
    return data if isinstance(data, dict) else {}


# --------------------------------------------------------------------------- #
# Rendezvous state (decoding without torch)
# --------------------------------------------------------------------------- #
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


# --------------------------------------------------------------------------- #
# etcd
# --------------------------------------------------------------------------- #
def rendezvous_key(rdzv_id: str) -> str:
    """The etcd v2 key torch uses for the state of run ``rdzv_id``."""
    return f"{RDZV_KEY_PREFIX}/{rdzv_id}"


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


# --------------------------------------------------------------------------- #
# Supervision of the command
# --------------------------------------------------------------------------- #
class Supervisor:
    """Runs the command as a child and forwards the pod's first stop signal to it.

    Signal handlers only record the signal (and forward it once the child
    exists); a stop before the child is started ends the launcher with 143.
    """

    def __init__(self, watcher: goodput.LineWatcher | None = None) -> None:
        self.watcher = watcher
        self.child: subprocess.Popen[bytes] | None = None
        self.stop_signal: int | None = None
        self.stop_at: float | None = None
        self.forwarded = False

    def install(self) -> None:
        """Install the handlers for :data:`STOP_SIGNALS`."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal, self.stop_at = signum, time.time()
        self._forward()

    def _forward(self) -> None:
        """Send the stop signal to the child, once (a second one would cut torchrun's shutdown short)."""
        if self.child is not None and self.stop_signal is not None and not self.forwarded:
            self.forwarded = True
            try:
                os.kill(self.child.pid, self.stop_signal)
            except ProcessLookupError:
                pass

    def check_stop(self) -> None:
        """Raise :class:`StopRequested` if a stop signal arrived."""
        if self.stop_signal is not None:
            raise StopRequested(signal.Signals(self.stop_signal).name)

    def sleep(self, seconds: float) -> None:
        """Sleep, but end at once (StopRequested) when a stop signal arrives."""
        deadline = time.monotonic() + seconds
        while True:
            self.check_stop()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(0.1, remaining))

    def run(self, command: list[str]) -> int:
        """Start ``command`` (own session), wait for it; return its exit code (128 + N for signal N)."""
        self.check_stop()
        log("spawn", command=command)
        sys.stdout.flush()
        sys.stderr.flush()
        # The command's stdout comes through a pipe: every line is forwarded to the pod's log as it is and read for
        # the goodput ledger (goodput.LineWatcher). Its stderr goes to the pod's log directly.
        env = dict(os.environ, **{LAUNCHER_ENV: "1"})  # run_script.py: a FAILED it writes ends the pod here (exit 3)
        child = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE, env=env)
        assert child.stdout is not None
        reader = threading.Thread(target=self._forward_output, args=(child.stdout,), name="command-output", daemon=True)
        reader.start()
        # A signal that arrived while the child was being started is forwarded now; signals are
        # blocked meanwhile so the handler and this code cannot both forward it.
        blocked = set(STOP_SIGNALS)
        signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            self.child = child
            self._forward()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        code = child.wait()
        self.child = None  # reaped: its pid may be reused, a late signal must not be sent there
        # The pipe ends when the last process holding it exits (a worker's orphan may hold it a little longer).
        reader.join(10.0)
        return 128 - code if code < 0 else code

    def _forward_output(self, stream: Any) -> None:
        """Copy the command's stdout to ours line by line, and show each line to the goodput watcher."""
        out = sys.stdout.buffer
        for raw in iter(stream.readline, b""):
            try:
                with _STDOUT_LOCK:
                    out.write(raw)
                    out.flush()
            except (OSError, ValueError):
                # Our own stdout failed (EPIPE, EIO): keep draining, or the command blocks on a full pipe while it
                # holds its log lock, and a rank that cannot print stalls its whole group.
                pass
            if self.watcher is not None:
                try:
                    self.watcher.line(raw.decode("utf-8", "replace"))
                except Exception as exc:  # the accounting must never cost the job its output
                    log("goodput_line_error", error=repr(exc))


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


def pod_exit_code(args: LaunchArgs, supervisor: Supervisor, command_code: int) -> int:
    """The pod's exit code once the command ended (see the module docstring)."""
    done = read_done(args.output_dir)
    failed = read_failed(args.output_dir)
    stop = signal.Signals(supervisor.stop_signal).name if supervisor.stop_signal is not None else None
    if done is not None:
        code, outcome = EXIT_OK, "complete"
    elif failed is not None:
        code, outcome = EXIT_RUN_FAILED, "run_failed"
    elif command_code == 0:
        # torchrun exits 0 only when every worker did (after a stop signal it exits 1): the program finished
        done = record_done(args.output_dir, command_code)
        code, outcome = EXIT_OK, "complete"
    elif stop is not None:
        code, outcome = EXIT_STOPPED, "stopped"
    elif args.rdzv_backend == "etcd-v2" and not etcd_reachable(args):
        code, outcome = EXIT_RENDEZVOUS_LOST, "rendezvous_lost"
    else:
        code, outcome = command_code, "command_failed"
    log(
        "command_exit",
        command_code=command_code,
        exit_code=code,
        outcome=outcome,
        stop_signal=stop,
        seconds_since_stop_signal=round(time.time() - supervisor.stop_at, 3) if supervisor.stop_at else None,
        failed=failed,
        done=done,
    )
    return code


# --------------------------------------------------------------------------- #
# Main
# --------------------------------------------------------------------------- #
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the pod's exit code."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        log("usage_error", error=str(exc))
        print(f"{build_parser().format_usage().rstrip()}\nlaunch.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    launched_at = time.time()
    supervisor = Supervisor()
    supervisor.install()
    log(
        "launch_start",
        at=launched_at,  # the goodput ledger's "launch" record: the run's start, the same instant in both
        rdzv_backend=args.rdzv_backend,
        rdzv_id=args.rdzv_id,
        rdzv_endpoint=args.rdzv_endpoint,
        output_dir=str(args.output_dir),
        pid=os.getpid(),
    )
    try:
        done = read_done(args.output_dir)
        if done is not None:
            log(
                "already_complete",
                output_dir=str(args.output_dir),
                done=done,
                text="run already complete (DONE exists); not starting torchrun",
            )
            return EXIT_OK
        failed = read_failed(args.output_dir)
        if failed is not None:
            log(
                "run_failed",
                output_dir=str(args.output_dir),
                failed=failed,
                text="the run gave up (FAILED exists); not starting torchrun; delete FAILED to retry",
            )
            return EXIT_RUN_FAILED
        if args.rdzv_backend == "etcd-v2":
            if reset_closed_rendezvous(args, supervisor):
                return EXIT_OK
        else:
            log(
                "rendezvous_no_reset",
                rdzv_backend=args.rdzv_backend,
                text="c10d keeps its store in node 0's agent; nothing persistent to reset",
            )
        ledger = goodput.Ledger(args.output_dir, goodput.source_name())
        ledger.record("launch", at=launched_at)
        supervisor.watcher = goodput.LineWatcher(ledger, os.environ.get(goodput.STEP_PATTERN_ENV) or None)
        command_code = supervisor.run(args.command)
        # whether the run gave up (its FAILED file): an exit 0 then ends no attempt as done (goodput's accounting)
        ledger.record("exit", command_code=command_code, failed=read_failed(args.output_dir) is not None)
        if not ledger.close():
            log(
                "goodput_not_recorded",
                path=str(ledger.path),
                error=ledger.error,
                text="the goodput ledger could not be written; the job's accounting misses this pod",
            )
    except LaunchError as exc:
        log("launch_failed", error=str(exc))
        print(f"launch.py: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except StopRequested as exc:
        log("stopped_before_start", signal=str(exc), text="stop signal before torchrun was started")
        return EXIT_STOPPED
    except OSError as exc:
        log("exec_failed", command=args.command, error=repr(exc))
        return EXIT_EXEC_FAILED
    code = pod_exit_code(args, supervisor, command_code)
    if code == EXIT_OK:
        record_goodput(args)
    return code


def record_goodput(args: LaunchArgs) -> dict[str, Any] | None:
    """The run is complete: account every pod's ledger (:func:`goodput.account`), add the result to the run's
    ``metrics.json`` (written for a program that wrote none) and log it. Every pod's launcher does it when the run
    completes; the last one has read the most complete ledger. Returns the fields added (None if not written)."""
    try:
        accounting = goodput.account(goodput.read_ledgers(args.output_dir))
        fields = goodput.metrics_fields(accounting)
        path = args.output_dir / metrics.FILE_NAME
        try:
            existing = json.loads(path.read_text())
        except (OSError, ValueError):
            existing = None
        base = dict(existing) if isinstance(existing, dict) else {}
        base.pop("schema", None)
        program = str(base.pop("program", None) or program_name(args.command))
        base.setdefault("wall_time_s", accounting["wall_s"])
        metrics.write_metrics(path, program, **{**base, **fields})
    except OSError as exc:
        log("goodput_not_recorded", output_dir=str(args.output_dir), error=repr(exc))
        return None
    log("goodput", **fields)
    return fields


def program_name(command: Sequence[str]) -> str:
    """The program a command runs: its script (the first ``*.py`` after torchrun's options, the one after
    :data:`RUN_SCRIPT` when the command runs it through that), else its first word."""
    rest = command[len(torchrun_part(command)) :]
    if len(rest) > 1 and Path(rest[0]).name == RUN_SCRIPT:
        rest = rest[1:]
    return Path(rest[0]).name if rest else Path(command[0]).name


if __name__ == "__main__":
    sys.exit(main())
