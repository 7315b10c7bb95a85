"""Model, augmentation, sampler and LR schedule shared by ``train.py`` and ``evaluate.py``.

The data format itself lives in :mod:`cifar_io` (no torch dependency).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset
from torch.utils.data.distributed import DistributedSampler

from cifar_io import NUM_CLASSES, atomic_write


# --------------------------------------------------------------------------- #
# Dataset, augmentation and sampler
# --------------------------------------------------------------------------- #
class CifarArrays(Dataset[tuple[torch.Tensor, int]]):
    """In-memory CIFAR images returned as uint8 ``3 x 32 x 32`` tensors.

    With ``augment=True`` each sample gets the standard CIFAR augmentation:
    a random 32x32 crop of the image zero-padded by ``pad`` pixels, then a
    horizontal flip with probability 0.5.  Randomness comes from torch's
    global generator, which the DataLoader seeds differently in every worker.
    Normalisation happens inside the model (see :class:`Normalize`), so the
    samples stay uint8 and cheap to move between processes.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, augment: bool, pad: int = 4) -> None:
        if images.shape[0] != labels.shape[0]:
            raise ValueError("images and labels differ in length")
        self.images = torch.from_numpy(np.ascontiguousarray(images))
        self.labels = labels.astype(np.int64)
        self.augment = augment
        self.pad = pad

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index]
        if self.augment:
            image = random_crop_flip(image, self.pad)
        return image, int(self.labels[index])


def random_crop_flip(image: torch.Tensor, pad: int) -> torch.Tensor:
    """Random crop (after zero padding by ``pad``) plus random horizontal flip."""
    _, height, width = image.shape
    padded = torch.nn.functional.pad(image, (pad, pad, pad, pad))
    top, left = (int(v) for v in torch.randint(0, 2 * pad + 1, (2,)))
    out = padded[:, top : top + height, left : left + width]
    if bool(torch.rand(()) < 0.5):
        out = out.flip(-1)
    return out.contiguous()


class ResumableDistributedSampler(DistributedSampler[int]):
    """A :class:`DistributedSampler` that can start an epoch part-way through.

    Every epoch draws one permutation of the whole dataset from
    ``seed + epoch`` (identical on all ranks and for every world size).  Rank
    ``r`` of ``W`` takes positions ``start + r, start + r + W, ...`` of that
    permutation, where ``start`` is the number of samples the whole job has
    already consumed in this epoch.  After every rank has taken ``k`` samples,
    exactly the prefix ``perm[:start + k * W]`` is consumed, whatever ``W`` was,
    so a restart with a different world size resumes the same epoch without
    repeating or skipping samples (only the tail smaller than ``W`` is dropped).
    """

    def __init__(self, dataset_len: int, num_replicas: int, rank: int, seed: int) -> None:
        super().__init__(
            _SizedRange(dataset_len),
            num_replicas=num_replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=True,
        )
        self.dataset_len = dataset_len
        self.start = 0
        self._recompute()

    def set_start(self, consumed: int) -> None:
        """Skip the first ``consumed`` positions of this epoch's permutation."""
        if not 0 <= consumed <= self.dataset_len:
            raise ValueError(f"consumed={consumed} outside 0..{self.dataset_len}")
        self.start = consumed
        self._recompute()

    def _recompute(self) -> None:
        self.num_samples = (self.dataset_len - self.start) // self.num_replicas
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        perm = torch.randperm(self.dataset_len, generator=generator)
        remaining = perm[self.start : self.start + self.total_size]
        return iter(remaining[self.rank :: self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples


class _SizedRange(Dataset[int]):
    """The indices ``0..length-1``, standing in for a dataset in the sampler base class."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> int:
        if not 0 <= index < self.length:
            raise IndexError(index)
        return index


# --------------------------------------------------------------------------- #
# Model
# --------------------------------------------------------------------------- #
@dataclass(frozen=True)
class ModelConfig:
    """Everything needed to rebuild the network (stored in checkpoints and model.pt)."""

    width: int = 64
    num_classes: int = NUM_CLASSES
    mean: tuple[float, ...] = (0.4914, 0.4822, 0.4465)  # per channel, 0..1 scale
    std: tuple[float, ...] = (0.2470, 0.2435, 0.2616)
    logit_scale: float = 0.125

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly representation."""
        data = asdict(self)
        data["mean"] = list(self.mean)
        data["std"] = list(self.std)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`."""
        return cls(
            width=int(data["width"]),
            num_classes=int(data["num_classes"]),
            mean=tuple(float(v) for v in data["mean"]),
            std=tuple(float(v) for v in data["std"]),
            logit_scale=float(data["logit_scale"]),
        )


class Normalize(nn.Module):
    """Turn uint8 (or 0..255 float) images into per-channel standardised floats."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1) * 255.0)
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1) * 255.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardise ``x``."""
        return (x.float() - self.mean) / self.std


def conv_bn(c_in: int, c_out: int, pool: bool = False) -> nn.Sequential:
    """3x3 convolution, BatchNorm, ReLU and an optional 2x2 max-pool."""
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    ]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


class Residual(nn.Module):
    """``x + f(x)`` with ``f`` two conv-bn-relu blocks of the same width."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(conv_bn(channels, channels), conv_bn(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual connection."""
        out: torch.Tensor = x + self.body(x)
        return out


class ResNet9(nn.Module):
    """The ResNet-9 of the DAWNBench CIFAR-10 entries, with a configurable width.

    Channels are ``w, 2w, 4w, 8w`` (``w=64`` is the usual 6.5 M parameter
    net).  Input normalisation is part of the model so a saved model is
    self-contained: it takes uint8 ``N x 3 x 32 x 32`` images.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        w = config.width
        self.config = config
        self.normalize = Normalize(config.mean, config.std)
        self.features = nn.Sequential(
            conv_bn(3, w),
            conv_bn(w, 2 * w, pool=True),
            Residual(2 * w),
            conv_bn(2 * w, 4 * w, pool=True),
            conv_bn(4 * w, 8 * w, pool=True),
            Residual(8 * w),
            nn.AdaptiveMaxPool2d(1),
            nn.Flatten(),
        )
        self.classifier = nn.Linear(8 * w, config.num_classes, bias=False)
        self.logit_scale = config.logit_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for a batch of images."""
        logits: torch.Tensor = self.classifier(self.features(self.normalize(x)))
        return logits * self.logit_scale


def build_model(config: ModelConfig) -> ResNet9:
    """Construct the network described by ``config``."""
    return ResNet9(config)


def load_model_file(
    path: str | os.PathLike[str], map_location: str | torch.device = "cpu"
) -> tuple[ResNet9, dict[str, Any]]:
    """Load ``model.pt`` written by ``train.py``; return the model (eval mode) and the payload."""
    payload = torch.load(Path(path), map_location=map_location, weights_only=True)
    if not isinstance(payload, dict) or "state_dict" not in payload or "model_config" not in payload:
        raise ValueError(f"{path}: not a model file written by train.py")
    model = build_model(ModelConfig.from_dict(payload["model_config"]))
    model.load_state_dict(payload["state_dict"])
    model.eval()
    return model, payload


# --------------------------------------------------------------------------- #
# Learning-rate schedule
# --------------------------------------------------------------------------- #
class WarmupCosineSchedule:
    """Linear warm-up from ``peak/div`` to ``peak``, then cosine decay to ``peak*final``.

    The learning rate is a pure function of *training progress* (fraction of
    the planned samples seen), not of the step counter, so the schedule stays
    correct when an elastic restart changes the world size and hence the
    number of steps per epoch.  ``state_dict`` follows the torch scheduler
    convention so the state lives in the checkpoint next to the optimizer's.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        peak_lr: float,
        warmup_fraction: float,
        warmup_div: float = 10.0,
        final_fraction: float = 0.0,
    ) -> None:
        if not 0.0 <= warmup_fraction < 1.0:
            raise ValueError("warmup_fraction must be in [0, 1)")
        self.optimizer = optimizer
        self.peak_lr = peak_lr
        self.warmup_fraction = warmup_fraction
        self.warmup_div = warmup_div
        self.final_fraction = final_fraction
        self.progress = 0.0
        self.set_progress(0.0)

    def lr_at(self, progress: float) -> float:
        """Learning rate at ``progress`` in [0, 1]."""
        p = min(max(progress, 0.0), 1.0)
        start = self.peak_lr / self.warmup_div
        if p < self.warmup_fraction:
            return start + (self.peak_lr - start) * p / self.warmup_fraction
        decay = (p - self.warmup_fraction) / (1.0 - self.warmup_fraction)
        final = self.peak_lr * self.final_fraction
        return final + (self.peak_lr - final) * 0.5 * (1.0 + math.cos(math.pi * decay))

    def set_progress(self, progress: float) -> float:
        """Move to ``progress`` and set every parameter group's ``lr``; return it."""
        self.progress = progress
        lr = self.lr_at(progress)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def get_last_lr(self) -> list[float]:
        """Current learning rate of each parameter group."""
        return [float(group["lr"]) for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, float]:
        """Serializable state."""
        return {
            "peak_lr": self.peak_lr,
            "warmup_fraction": self.warmup_fraction,
            "warmup_div": self.warmup_div,
            "final_fraction": self.final_fraction,
            "progress": self.progress,
        }

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Restore the schedule shape and position (peak LR is kept from the current run)."""
        self.warmup_fraction = float(state["warmup_fraction"])
        self.warmup_div = float(state["warmup_div"])
        self.final_fraction = float(state["final_fraction"])
        self.set_progress(float(state["progress"]))


def atomic_torch_save(path: str | os.PathLike[str], obj: Any, before_publish: Callable[[], bool] | None = None) -> Path:
    """Atomically ``torch.save`` ``obj`` to ``path`` (``before_publish``: see ``cifar_io.atomic_write``)."""
    return atomic_write(path, lambda handle: torch.save(obj, handle), before_publish=before_publish)
