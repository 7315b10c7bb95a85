"""Every day-two change of the stack's own settings is one the cluster takes: each Kubernetes object it changes in place
is an update the apiserver accepts (:mod:`tests.update_rules`), or the change is refused before anything is registered
(``stacks.plan.upgrade``). A job key's changes are held to the same rules by tests/mock/test_job_restarts.py."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from stacks.config import ConfigError, load_config
from stacks.plan import build_plan
from stacks.plan.upgrade import compare
from stacks.stackfile import REPO
from tests.harness import PROJECT, run_program, stack_config
from tests.update_rules import refused_updates

P = f"{PROJECT}:"


def _storage(**settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config[P + "storage"] = {**(config.get(P + "storage") or {}), **settings}

    return change


def _fsx(**settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        storage = config.setdefault(P + "storage", {})
        storage["fsx"] = {**(storage.get("fsx") or {}), **settings}

    return change


def _group(name: str, **settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config[P + "nodeGroups"][name] = {**config[P + "nodeGroups"][name], **settings}

    return change


def _teams(config: dict[str, Any]) -> None:
    config[P + "teams"] = {"vision": {"quotaPercent": 100}}


def _section(name: str, **settings: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config[P + name] = {**(config.get(P + name) or {}), **settings}

    return change


def _job_removed(name: str) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        del config[P + "jobs"][name]

    return change


#: (stack, what changes, the change): settings of the cluster stack a user changes on a running stack.
CASES: list[tuple[str, str, Callable[[dict[str, Any]], None]]] = [
    ("dev", "storage.retainOnDelete on", _storage(retainOnDelete=True)),
    ("p5", "storage.pvcName", _storage(pvcName="results")),
    ("dev", "storage.capacity", _storage(capacity="2Ti")),
    ("dev", "storage.pvcName", _storage(pvcName="results")),
    ("dev", "storage.namespace", _storage(namespace="research")),
    ("dev", "storage.storageClassName", _storage(storageClassName="efs-training")),
    ("dev", "storage.throughputMode", _storage(throughputMode="bursting")),
    ("p5", "storage.fsx.storageCapacityGib", _fsx(storageCapacityGib=2400)),
    ("p5", "storage.fsx.throughputPerTib", _fsx(throughputPerTib=500)),
    ("g5", "a first team", _teams),
    ("g5", "a group's maxSize (its queue's quota)", _group("gpu", maxSize=4)),
    ("p5", "a group's maxSize (its queue's quota, topology-aware)", _group("gpu", maxSize=4)),
    ("dev", "a group's labels", _group("cpu", labels={"team": "vision"})),
    ("dev", "a group's taints", _group("cpu", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])),
    ("g5", "operations.metrics off", _section("operations", metrics=False)),
    ("dev", "operations.metrics on", _section("operations", metrics=True)),
    ("g5", "operations.alarmEmail", _section("operations", alarmEmail="oncall@example.com")),
    ("dev", "a job removed", _job_removed("evaluate")),
]


@pytest.mark.parametrize("stack, what, change", CASES, ids=[f"{s}-{w}" for s, w, _ in CASES])
def test_a_change_of_the_stacks_settings_is_taken_in_place_or_refused_first(
    stack: str, what: str, change: Callable[[dict[str, Any]], None]
) -> None:
    old_config = stack_config(stack)
    new_config = copy.deepcopy(old_config)
    change(new_config)
    old, new = (build_plan(load_config(PROJECT, stack, c, project_dir=REPO)) for c in (old_config, new_config))
    try:
        compare(old, new)
    except ConfigError:
        return  # refused before anything is registered: nothing reaches the cluster
    before = run_program(stack).registrations
    after = run_program(stack, config=new_config)
    assert after.error is None, after.error
    assert [r.inputs for r in before] != [r.inputs for r in after.registrations], f"{what} changes nothing"
    assert refused_updates(before, after.registrations) == [], what


def test_the_rules_see_a_refused_update() -> None:
    """Control: a StorageClass's reclaim policy changed in place, and a claim's size, are refused."""
    base = run_program("dev").registrations
    edited = copy.deepcopy(base)
    for r in edited:
        if r.type == "kubernetes:storage.k8s.io/v1:StorageClass":
            r.inputs["reclaimPolicy"] = "Retain" if r.inputs.get("reclaimPolicy") != "Retain" else "Delete"
        if r.type == "kubernetes:core/v1:PersistentVolumeClaim":
            r.inputs["spec"]["resources"]["requests"]["storage"] = "9Ti"
    refused = refused_updates(base, edited)
    assert any(x.endswith(": reclaimPolicy") for x in refused), refused
    assert any(x.endswith(": spec.resources") for x in refused), refused
