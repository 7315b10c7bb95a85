"""Writes TensorBoard event files as the bundled trainer (training/train.py) is to write them, with PyTorch's
``SummaryWriter``: ``train/loss`` and ``train/accuracy`` every step, ``test/accuracy`` and
``throughput/images_per_sec`` at the last step of every epoch, the step being the global step. Prints what it
wrote as JSON (tag -> [[step, value], ...]).

Usage: python trainer_scalars.py LOG_DIR [EPOCHS] [STEPS_PER_EPOCH]
"""

import json
import sys

from torch.utils.tensorboard import SummaryWriter


def main(log_dir: str, epochs: int = 3, steps_per_epoch: int = 10) -> None:
    written: dict[str, list[list[float]]] = {}

    def add(tag: str, value: float, step: int) -> None:
        writer.add_scalar(tag, value, step)
        written.setdefault(tag, []).append([step, value])

    writer = SummaryWriter(log_dir)
    try:
        for epoch in range(epochs):
            for step in range(epoch * steps_per_epoch, (epoch + 1) * steps_per_epoch):
                add("train/loss", 2.3 / (1 + step), step)
                add("train/accuracy", step / (epochs * steps_per_epoch), step)
            add("test/accuracy", 0.5 + 0.1 * epoch, step)
            add("throughput/images_per_sec", 1000.0 + epoch, step)
    finally:
        writer.close()
    print(json.dumps(written))


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:]))
