"""Fixtures of the training fault scenarios' pods (:mod:`tests.pod_runs`), shared by
tests/real/test_training_faults_real.py and tests/real/test_slow_volume_real.py (each module gets its own: module
scope)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import training_support as ts
from tests.pod_runs import PodRun


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits dataset in CIFAR-10 format."""
    return ts.make_digits_cifar(tmp_path_factory.mktemp("digits"))


@pytest.fixture(scope="module")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ts.EtcdServer]:
    """One etcd for the scenarios that leave it alone (each run has its own rendezvous id)."""
    with ts.running_etcd(tmp_path_factory.mktemp("faults-etcd")) as server:
        yield server


@pytest.fixture()
def runs() -> Iterator[list[PodRun]]:
    """Runs started by a test; every pod is killed at teardown."""
    started: list[PodRun] = []
    try:
        yield started
    finally:
        for run in started:
            run.kill()
