"""What is tested is what ships: every torch pin of the repository is the catalog's release, the training image's
defaults are the build the tests run, and each catalogued GPU gets a build with its kernels
(components/catalog/torch.py). The installed wheel itself is read by tests/real/test_torch_image_real.py."""

import re

from components.catalog.gpus import GPU_MODELS
from components.catalog.instances import INSTANCE_TYPES
from components.catalog.torch import (
    DEFAULT_TORCH_BUILD,
    TORCH_BUILD_ARGS,
    TORCH_BUILDS,
    TORCH_VERSION,
    declares_torch_build,
    torch_build_args,
    torch_build_for,
)
from components.image.dockerfile import Dockerfile
from tests.harness import REPO

TRAINING = REPO / "training" / "Dockerfile"


def test_every_torch_pin_of_the_repository_is_the_catalogs() -> None:
    """CI, the test dependencies and the images pin the catalog's release (the README is checked by the docs)."""
    pins = {
        ".ci/run": (REPO / ".ci" / "run").read_text(),
        "requirements-dev.txt": (REPO / "requirements-dev.txt").read_text(),
        "tests/training_support.py": (REPO / "tests" / "training_support.py").read_text(),
        "training/requirements.txt": (REPO / "training" / "requirements.txt").read_text(),
    }
    for where, text in pins.items():
        found = re.findall(r"torch(?:==| )(\d+\.\d+\.\d+)", text)
        assert found and set(found) == {TORCH_VERSION}, (where, found)
    assert "pip install -q torch==" + TORCH_VERSION in pins[".ci/run"]


def test_the_training_dockerfile_defaults_are_the_default_build() -> None:
    """Built by hand (``docker build training/``) the image gets what the plan gives a CPU or a non-Volta GPU node."""
    args = Dockerfile.read(TRAINING).build_args()
    assert declares_torch_build(args)
    assert {k: args[k].strip('"') for k in TORCH_BUILD_ARGS} == torch_build_args(TORCH_BUILDS[DEFAULT_TORCH_BUILD])


def test_every_catalogued_gpu_has_a_build_and_the_default_covers_all_but_volta() -> None:
    for model in GPU_MODELS.values():
        build = torch_build_for([model.compute_capability])
        assert build is not None, model.name
        expected = "cu126" if model.compute_capability < (7, 5) else DEFAULT_TORCH_BUILD
        assert build.name == expected, model.name
    # every GPU instance type of the catalog runs one of them
    for t in INSTANCE_TYPES.values():
        if t.is_gpu:
            assert torch_build_for([GPU_MODELS[t.gpu_model or ""].compute_capability]) is not None, t.name
    # no GPUs: the default; Volta with Blackwell: none
    assert torch_build_for([]) is TORCH_BUILDS[DEFAULT_TORCH_BUILD]
    assert torch_build_for([(7, 0), (10, 0)]) is None
