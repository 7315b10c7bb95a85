"""A user's program for a ``command`` job (the tests run it as ``prep.py`` from the job's code folder): it joins
its peers with ``torch.distributed``'s ``env://`` (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``:
the pod environment CommandJob sets), all-reduces ``rank + 1``, gathers what every pod was told and writes
``$OUTPUT_DIR/rank-<RANK>.json``."""

import datetime
import json
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    told = {
        k: os.environ.get(k)
        for k in ("JOB_INDEX", "NODE_RANK", "JOB_PEERS", "JOB_SIZE", "OUTPUT_DIR", "DATA_DIR", "SEED")
    }
    everyone: list = [None] * size
    dist.all_gather_object(everyone, told)
    out = Path(os.environ["OUTPUT_DIR"])
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "rank": rank,
        "world_size": size,
        "sum": float(total.item()),
        "peers": everyone,
        "host": socket.gethostname(),
        "cwd": os.getcwd(),
    }
    (out / f"rank-{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
