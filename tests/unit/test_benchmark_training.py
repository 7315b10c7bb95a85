"""The training side of a benchmark: the metrics file every program writes (training/metrics.py), train.py's
metrics over its epochs, and the synthetic ResNet benchmark (its models against torchvision's published sizes,
and two ranks under torchrun on 127.0.0.1)."""

import json
from pathlib import Path

import pytest

from tests import training_support  # noqa: F401  (puts training/ on sys.path)

# isort: split

import metrics  # noqa: E402  (training/ is on sys.path through tests.training_support)
import synthetic_benchmark  # noqa: E402
import train_outputs  # noqa: E402


def test_metrics_files_have_every_field_and_are_written_atomically(tmp_path: Path) -> None:
    path = metrics.write_metrics(tmp_path, "x.py", throughput=3.5, throughput_unit="images/s", extra=1)
    assert path == tmp_path / "metrics.json"
    written = json.loads(path.read_text())
    assert list(written)[: len(metrics.FIELDS) + 1] == ["schema", *metrics.FIELDS]
    assert written["final_accuracy"] is None and written["extra"] == 1 and written["program"] == "x.py"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"], "no temporary file left"
    assert path.stat().st_mode & 0o777 == 0o644, "other pods (other uids) read it, as the shared files of a run"


def test_train_py_metrics_span_every_epoch_and_restart() -> None:
    history = [
        {
            "epoch": 1,
            "world_size": 2,
            "images": 1000,
            "train_time_s": 10.0,
            "epoch_time_s": 12.0,
            "train_loss": 2.0,
            "test_accuracy": 0.4,
            "test_loss": 1.9,
        },
        {
            "epoch": 2,
            "world_size": 1,
            "images": 500,
            "train_time_s": 10.0,
            "epoch_time_s": 11.0,
            "train_loss": 1.5,
            "test_accuracy": 0.6,
            "test_loss": 1.4,
        },
    ]
    m = train_outputs.training_metrics(history)
    assert m == {
        "wall_time_s": 23.0,
        "throughput": 75.0,
        "throughput_unit": "images/s",
        "final_loss": 1.5,
        "final_accuracy": 0.6,
        "final_test_loss": 1.4,
        "world_size": 1,
        "epochs": 2,
    }
    assert train_outputs.training_metrics([])["throughput"] is None


@pytest.mark.parametrize(
    "name,parameters",
    [("resnet18", 11_689_512), ("resnet34", 21_797_672), ("resnet50", 25_557_032), ("resnet101", 44_549_160)],
)
def test_the_models_are_torchvisions_resnets(name: str, parameters: int) -> None:
    """Parameter counts of torchvision's ResNets for 1000 classes (its model table,
    https://pytorch.org/vision/stable/models.html#table-of-all-available-classification-weights)."""
    assert sum(p.numel() for p in synthetic_benchmark.resnet(name).parameters()) == parameters


def test_bad_arguments_are_usage_errors() -> None:
    for argv in (["--batch-size", "0"], ["--image-size", "16"], ["--model", "vgg16"], ["--warmup-steps", "-1"]):
        with pytest.raises(SystemExit) as exc:
            synthetic_benchmark.parse_args(argv)
        assert exc.value.code == 2, argv


class _Initialised(Exception):
    """Raised by the stand-in of ``init_process_group`` once it has seen its arguments."""


@pytest.mark.parametrize(
    "env_value, argv, seconds", [("17", [], 17.0), ("", [], 60.0), ("17", ["--pg-timeout-seconds", "5"], 5.0)]
)
def test_collectives_time_out_after_the_jobs_collective_timeout(
    monkeypatch: pytest.MonkeyPatch, env_value: str, argv: list[str], seconds: float
) -> None:
    """The job's ``collectiveTimeoutSeconds`` reaches the pods as ``PG_TIMEOUT_SECONDS``
    (components/workloads/pytorch.py), and the benchmark's process group times out after it, as train.py's does
    (a fixed 10 minutes let one hung peer idle every GPU of the run that long)."""
    seen: dict[str, object] = {}

    def init_process_group(backend: str, **kwargs: object) -> None:
        seen.update(backend=backend, **kwargs)
        raise _Initialised

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("PG_TIMEOUT_SECONDS", env_value)
    monkeypatch.setattr(synthetic_benchmark.dist, "init_process_group", init_process_group)
    with pytest.raises(_Initialised):
        synthetic_benchmark.main(argv)
    assert seen["timeout"] == synthetic_benchmark.dt.timedelta(seconds=seconds)


def test_a_non_positive_collective_timeout_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        synthetic_benchmark.parse_args(["--pg-timeout-seconds", "0"])
    assert exc.value.code == 2
