"""Every claim every stack registers can take a new size of its setting: Kubernetes grows a bound claim only when its
StorageClass allows expansion, and never shrinks one (kubernetes plugin/pkg/admission/storage/persistentvolume/resize
admission.go; the claim's update validation). So a claim bound to a given volume (FSx's static one) keeps its first
size, and a change of a claim's size that Kubernetes would refuse is refused before anything is registered
(``stacks.plan.upgrade``), naming every such claim."""

from typing import Any

import pytest

from stacks.config import ConfigError, load_config
from stacks.plan import build_plan
from stacks.plan.upgrade import compare
from tests.harness import PROJECT, Program, run_program, stack_config, stack_names

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
TEAMS = {"vision": {"quotaPercent": 50}, "nlp": {"namespace": "team-nlp", "quotaPercent": 50}}
#: Every preset, and g5 with two teams (their claims too).
CASES = [(s, None) for s in stack_names()] + [("g5", TEAMS)]


def _config(stack: str, teams: Any) -> dict[str, Any]:
    cfg = stack_config(stack)
    if teams is not None:
        cfg[f"{PROJECT}:teams"] = teams
    return cfg


def _program(stack: str, teams: Any) -> Program:
    return run_program(stack) if teams is None else run_program(stack, config=_config(stack, teams))


def _grown(cfg: dict[str, Any]) -> dict[str, Any]:
    """The configuration with a larger size of its claims' setting (EFS's capacity, FSx's storage capacity)."""
    storage = dict(cfg.get(f"{PROJECT}:storage") or {})
    if storage.get("backend") == "fsx":
        fsx = dict(storage.get("fsx") or {})
        fsx["storageCapacityGib"] = 2 * int(fsx.get("storageCapacityGib", 1200))  # keeps each tier's increments
        storage["fsx"] = fsx
    else:
        storage["capacity"] = "2Ti" if storage.get("capacity", "1Ti") != "2Ti" else "3Ti"
    return {**cfg, f"{PROJECT}:storage": storage}


@pytest.mark.parametrize("stack, teams", CASES, ids=[s + ("-teams" if t else "") for s, t in CASES])
def test_every_claim_takes_a_new_size_or_the_change_is_refused_first(stack: str, teams: Any) -> None:
    p = _program(stack, teams)
    classes = {r.inputs["metadata"]["name"]: r.inputs for r in p.of_type(STORAGE_CLASS)}
    claims = p.of_type(PVC)
    assert claims, "every preset makes its shared claim"
    cfg = _config(stack, teams)
    old = build_plan(load_config(PROJECT, stack, cfg))
    new = build_plan(load_config(PROJECT, stack, _grown(cfg)))
    resizable: list[str] = []
    for claim in claims:
        spec, meta = claim.inputs["spec"], claim.inputs["metadata"]
        where = f"{meta['namespace']}/{meta['name']}"
        if spec.get("storageClassName") == "":
            # a static volume's claim: the admission plugin refuses any growth, so the program never sends one
            assert "spec.resources" in claim.ignore_changes, where
            continue
        sc = classes.get(spec["storageClassName"])
        assert sc is not None, f"{where}: its StorageClass is not the stack's"
        assert not sc.get("allowVolumeExpansion"), f"{where}: its class allows expansion; this test assumes not"
        resizable.append(where)
    if not resizable:
        compare(old, new)  # FSx grows in place; its claim keeps its size
        return
    with pytest.raises(ConfigError) as refused:
        compare(old, new)
    (problem,) = refused.value.problems
    assert problem.startswith(f"{PROJECT}:storage.capacity: "), problem
    assert f"cannot resize the claims {', '.join(sorted(resizable))} (" in problem, problem
