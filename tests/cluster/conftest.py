"""The cluster tier's fixtures: the box's binaries (built once), every stack's objects and registrations (the
program evaluated once per stack), and the apiserver at the oldest minor shared by a worker's presets."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from stacks.box import build as box_build
from stacks.box.manifests import registered_objects
from tests.cluster.support import _box
from tests.harness import run_program


@pytest.fixture(scope="session")
def binaries() -> dict[str, Path]:
    return box_build.build()


@pytest.fixture(scope="session")
def objects_of():
    cache: dict[str, list[dict]] = {}

    def get(stack: str) -> list[dict]:
        if stack not in cache:
            cache[stack] = registered_objects(run_program(stack).registrations)
        return copy.deepcopy(cache[stack])

    return get


@pytest.fixture(scope="session")
def oldest_box(binaries, tmp_path_factory):
    """One apiserver at the oldest minor for every preset's objects (one per xdist worker): bringing a box up per
    preset cost more than applying its objects. Each test removes what it applied (:func:`_remove`) and first checks
    what would make a shared box more lenient than a fresh one (:func:`_self_contained`)."""
    box = _box(binaries, tmp_path_factory.mktemp("oldest"), "apply", "kubernetes-oldest")
    box.up()
    box.built_in_groups = {g["name"] for g in box.api.request("GET", "/apis")[1]["groups"]} | {""}
    yield box
    box.down()


@pytest.fixture(scope="session")
def registrations_of():
    cache: dict[str, list] = {}

    def get(stack: str) -> list:
        if stack not in cache:
            cache[stack] = run_program(stack).registrations
        return cache[stack]

    return get
