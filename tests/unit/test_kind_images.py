"""A ``tensorflow`` job's image holds TensorFlow (stacks/config/rules/kind_images.py): an image on a catalogued base
without it, whose Dockerfile and install files never name it, is refused before anything is created."""

import shutil
from pathlib import Path
from typing import Any, Optional

import pytest

from components.catalog.charts import BASE_IMAGES
from stacks.config import ConfigError, load_config
from tests.harness import PROJECT, REPO, stack_config

pytestmark = pytest.mark.unit

P = f"{PROJECT}:"
REFUSED = "eks-training:jobs.tf.image: tensorflow job tf runs image 'training'"


def _config(image: Optional[dict[str, Any]] = None, name: str = "training") -> dict[str, Any]:
    """The dev stack with a two-pod tensorflow job on its CPU group, on ``image`` as its image ``name``."""
    cfg = stack_config("dev")
    cfg[P + "jobs"] = {"tf": {"kind": "tensorflow", "nodes": 2, "command": ["python", "t.py"], "image": name}}
    if image is not None:
        cfg[P + "images"] = {name: image}
    return cfg


def _problems(cfg: dict[str, Any], project_dir: Optional[Path] = None) -> list[str]:
    try:
        load_config(PROJECT, "dev", cfg, project_dir=project_dir)
    except ConfigError as e:
        return list(e.problems)
    return []


def _copy(tmp_path: Path, folder: str = "training") -> Path:
    """A project whose ``my-image`` folder is a copy of a shipped build folder."""
    shutil.copytree(REPO / folder, tmp_path / "my-image", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "my-image"


def test_a_tensorflow_job_on_the_shipped_training_image_is_refused_with_the_fix() -> None:
    (problem,) = _problems(_config())
    assert problem.startswith(REFUSED), problem
    assert "built on public.ecr.aws/docker/library/ubuntu:24.04, which has no tensorflow" in problem
    assert "eks-training:images.tensorflow: {context: images/tensorflow}, then image: tensorflow" in problem


def test_the_fix_the_message_gives_is_taken() -> None:
    cfg = _config()
    cfg[P + "images"] = {"tensorflow": {"context": "images/tensorflow"}}
    cfg[P + "jobs"]["tf"]["image"] = "tensorflow"
    assert _problems(cfg) == []


def test_a_copy_of_training_that_installs_tensorflow_is_taken(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    assert [p for p in _problems(_config({"context": "my-image"}), tmp_path) if p.startswith(REFUSED)], "control"
    with (folder / "requirements.txt").open("a") as f:
        f.write("tensorflow-cpu==2.17.1\n")
    assert _problems(_config({"context": "my-image"}), tmp_path) == []


def test_a_dockerfile_that_installs_tensorflow_itself_is_taken(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    with (folder / "Dockerfile").open("a") as f:
        f.write("RUN /opt/venv/bin/pip install --no-cache-dir 'TensorFlow==2.17.1'\n")
    assert _problems(_config({"context": "my-image"}), tmp_path) == []


def test_an_install_file_the_build_leaves_out_does_not_count(tmp_path: Path) -> None:
    """A requirements file the context's .dockerignore leaves out never reaches the build."""
    folder = _copy(tmp_path)
    (folder / "requirements-tf.txt").write_text("tensorflow==2.17.1\n")
    assert "requirements-tf.txt" not in (folder / ".dockerignore").read_text()
    assert [p for p in _problems(_config({"context": "my-image"}), tmp_path) if p.startswith(REFUSED)]


def test_an_image_on_a_base_with_tensorflow_is_taken(tmp_path: Path) -> None:
    """The shipped horovod image: NGC's TensorFlow container, which the catalog says holds it."""
    assert "tensorflow" in BASE_IMAGES["tensorflow-25.02-tf2-py3"].python_packages
    folder = tmp_path / "my-image"
    folder.mkdir()
    (folder / "Dockerfile").write_text(f"FROM {BASE_IMAGES['tensorflow-25.02-tf2-py3'].ref}\n")
    assert _problems(_config({"context": "my-image"}, "tf"), tmp_path) == []


def test_what_the_catalog_cannot_tell_is_not_checked(tmp_path: Path) -> None:
    """A prebuilt image, or one on a base the catalog does not describe (it may well hold TensorFlow)."""
    assert _problems(_config({"prebuilt": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tf:1"}, "tf")) == []
    folder = tmp_path / "my-image"
    folder.mkdir()
    (folder / "Dockerfile").write_text("FROM 123456789012.dkr.ecr.us-east-1.amazonaws.com/ml-base:1\n")
    assert _problems(_config({"context": "my-image"}, "tf"), tmp_path) == []
    (folder / "Dockerfile").write_text(f"FROM {BASE_IMAGES['ubuntu-24.04'].ref}\n")
    (problem,) = _problems(_config({"context": "my-image"}, "tf"), tmp_path)
    assert problem.startswith("eks-training:jobs.tf.image: tensorflow job tf runs image 'tf'"), "control"


def test_every_shipped_tensorflow_job_runs_an_image_with_tensorflow() -> None:
    """The presets' tensorflow jobs load (their images install it, or inherit it)."""
    for stack in ("tensorflow",):
        cfg = stack_config(stack)
        assert any(j["kind"] == "tensorflow" for j in cfg[P + "jobs"].values())
        load_config(PROJECT, stack, cfg)
