"""Evaluate a trained ``model.pt`` on the CIFAR-10 test batch.

Prints the overall and per-class accuracy (class names from ``batches.meta``)
and writes them atomically as JSON (default ``<model dir>/evaluation.json``)::

    python /app/evaluate.py --model /data/run1/model.pt --data-dir /data \\
        [--output-json PATH] [--min-accuracy 0.9] [--batch-size 1000] [--device auto]

Exit codes: 0 success; 1 model or data missing/unreadable; 2 usage error;
3 accuracy below ``--min-accuracy`` (the JSON is still written).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cifar  # noqa: E402  (needs the sys.path entry above)
import cifar_io  # noqa: E402

EXIT_OK = 0
EXIT_MISSING = 1
EXIT_BELOW_THRESHOLD = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line interface."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="model.pt written by train.py")
    parser.add_argument(
        "--data-dir", required=True, type=Path, help="folder containing cifar-10-batches-py/ (or that folder itself)"
    )
    parser.add_argument(
        "--output-json",
        type=Path,
        default=None,
        help="where to write the results (default: <model dir>/evaluation.json)",
    )
    parser.add_argument(
        "--min-accuracy", type=float, default=None, help="exit with code 3 if the overall accuracy is below this (0..1)"
    )
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args(argv)
    if args.min_accuracy is not None and not 0.0 <= args.min_accuracy <= 1.0:
        parser.error("--min-accuracy must be between 0 and 1")
    if args.batch_size < 1:
        parser.error("--batch-size must be >= 1")
    return args


def pick_device(choice: str) -> torch.device:
    """``auto`` means CUDA when available, else CPU."""
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda requested but CUDA is not available")
    return torch.device(choice)


@torch.no_grad()
def predict(model: torch.nn.Module, images: torch.Tensor, device: torch.device, batch_size: int) -> torch.Tensor:
    """Predicted class of every image."""
    predictions = []
    for start in range(0, images.shape[0], batch_size):
        batch = images[start : start + batch_size].to(device)
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=device.type == "cuda"):
            logits = model(batch)
        predictions.append(logits.argmax(dim=1).cpu())
    return torch.cat(predictions)


def score(predictions: torch.Tensor, labels: torch.Tensor, class_names: list[str]) -> dict[str, Any]:
    """Overall accuracy, per-class accuracy and support."""
    correct = predictions == labels
    per_class: dict[str, dict[str, float | int | None]] = {}
    for index, name in enumerate(class_names):
        mask = labels == index
        support = int(mask.sum())
        per_class[name] = {
            "index": index,
            "accuracy": float(correct[mask].float().mean()) if support else None,
            "correct": int(correct[mask].sum()),
            "support": support,
        }
    return {
        "accuracy": float(correct.float().mean()),
        "correct": int(correct.sum()),
        "total": int(labels.numel()),
        "per_class": per_class,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    output_json: Path = args.output_json or args.model.parent / "evaluation.json"

    if not args.model.is_file():
        print(f"error: model file not found: {args.model}", file=sys.stderr)
        return EXIT_MISSING
    missing = [
        name
        for name in (cifar_io.TEST_BATCH_NAME, cifar_io.META_NAME)
        if not (cifar_io.batch_dir(args.data_dir) / name).is_file()
    ]
    if missing:
        print(f"error: {', '.join(missing)} not found in {cifar_io.batch_dir(args.data_dir)}", file=sys.stderr)
        return EXIT_MISSING

    device = pick_device(args.device)
    try:
        model, payload = cifar.load_model_file(args.model, map_location="cpu")
        images_np, labels_np = cifar_io.load_split(args.data_dir, train=False)
        class_names = cifar_io.load_label_names(args.data_dir)
    except (cifar_io.DatasetError, ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MISSING
    model = model.to(device)

    start = time.time()
    predictions = predict(model, torch.from_numpy(images_np), device, args.batch_size)
    result = score(predictions, torch.from_numpy(labels_np), class_names)
    result.update(
        {
            "model": str(args.model.resolve()),
            "data_dir": str(args.data_dir.resolve()),
            "model_config": payload["model_config"],
            "device": str(device),
            "seconds": round(time.time() - start, 3),
            "evaluated_at": dt.datetime.now(dt.UTC).isoformat(),
            "min_accuracy": args.min_accuracy,
        }
    )
    passed = args.min_accuracy is None or result["accuracy"] >= args.min_accuracy
    result["passed"] = passed
    cifar_io.atomic_write_json(output_json, result)

    print(f"overall accuracy: {result['accuracy']:.4f} ({result['correct']}/{result['total']})")
    for name, stats in result["per_class"].items():
        shown = "n/a" if stats["accuracy"] is None else f"{stats['accuracy']:.4f}"
        print(f"  {name:>12}: {shown} ({stats['correct']}/{stats['support']})")
    print(
        json.dumps(
            {"event": "evaluation", "accuracy": result["accuracy"], "output_json": str(output_json), "passed": passed}
        ),
        flush=True,
    )
    if not passed:
        print(f"error: accuracy {result['accuracy']:.4f} is below --min-accuracy {args.min_accuracy}", file=sys.stderr)
        return EXIT_BELOW_THRESHOLD
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
