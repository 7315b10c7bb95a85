"""A stop signal that reaches DataLoader workers while they start (tests/real/test_loader_signals_real.py).

Runs the trainer's own loader start (``train_stop.start_loader``, or plain ``iter`` with ``--plain``) and worker init
(``train_stop._worker_init``) over a small dataset with 4 workers. With ``--snippet`` it runs the job contract's example
(docs/reference/job-contract.md) as written, on the same dataset. The window between PyTorch installing a worker's
SIGTERM handler and running ``worker_init_fn`` is widened to ``--window`` seconds (the name-setting call PyTorch makes
right after installing the handlers sleeps first), so the test can send SIGTERM to the whole process group inside it,
as torchrun does on a membership change. Prints ``{"event": "workers_starting"}`` once the workers are forked, then
one JSON line with the batches served and whether the program itself saw the stop.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import textwrap
import time
from pathlib import Path
from types import FrameType
from typing import Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "training"))

import torch  # noqa: E402
import torch.multiprocessing  # noqa: E402
import train_stop  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


def contract_example() -> str:
    """The DataLoader example of docs/reference/job-contract.md (its Python block that starts loader workers), as a
    user copies it."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "reference" / "job-contract.md").read_text(), re.S)
    (block,) = [b for b in blocks if "worker_init_fn" in b]
    return textwrap.dedent(block)


def raise_once() -> None:
    """PyTorch's SIGCHLD handler (set as the workers start) raises a dead worker's error in this process wherever it
    is, once per worker that dies: with four dying, a second error could end the process as it reports the first.
    Only the first is raised."""
    handler = signal.getsignal(signal.SIGCHLD)
    if not callable(handler):
        return
    raised = []

    def first_only(signum: int, frame: Optional[FrameType]) -> None:
        if raised:
            return
        try:
            handler(signum, frame)
        except RuntimeError:
            raised.append(signum)
            raise

    signal.signal(signal.SIGCHLD, first_only)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--plain", action="store_true", help="iter(loader), as before the fix")
    parser.add_argument("--snippet", action="store_true", help="the job contract's example, as written")
    args = parser.parse_args()

    original = torch.multiprocessing._set_thread_name

    def slow_name(name: str) -> None:
        time.sleep(args.window)
        original(name)

    torch.multiprocessing._set_thread_name = slow_name  # type: ignore[assignment]
    stop = train_stop.StopRequest()
    stop.install()
    dataset = TensorDataset(torch.arange(64, dtype=torch.float32))
    if args.snippet:
        scope = {"dataset": dataset}
        exec(contract_example(), scope)  # its loader: batches of one, its workers started as it starts them
        iterator = scope["batches"]
    else:
        loader: DataLoader[tuple[torch.Tensor, ...]] = DataLoader(
            dataset, batch_size=8, num_workers=4, worker_init_fn=train_stop._worker_init
        )
        iterator = iter(loader) if args.plain else train_stop.start_loader(loader)
    raise_once()
    try:  # from the line on: the test signals the workers once it reads it
        print(json.dumps({"event": "workers_starting", "time": time.time()}), flush=True)
        batches = sum(1 for _ in iterator)
        error = None
    except RuntimeError as exc:
        batches, error = -1, str(exc)
    print(
        json.dumps({"event": "served", "batches": batches, "error": error, "stop_requested": stop.requested}),
        flush=True,
    )
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
