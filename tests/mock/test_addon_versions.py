"""Every version-dependent setting the program passes an EKS add-on is at a version that has it: over every shipped
stack, its stress variant and the held-out stacks (tests/variants.py).

For every ``aws:eks/addon:Addon`` registered: each key of its configuration values and its Pod Identity association
have a version fact (``components.catalog.addons.ADDON_FEATURES``); the version registered is the one
``addon_version_for`` decides (the stack's override, else this project's pin, else EKS's default read by the
``getAddonVersion`` invoke); a known version has every setting, and runs the add-on's DCGM DaemonSet on every GPU type
of the stack; and every setting is among what the stack's rules and preflight check (``stacks.config.addons``), so EKS's
default is checked too, by the preflight the stack runs.
"""

import dataclasses
import json
from typing import Any, Callable

import pytest

from components.catalog.addons import (
    ADDON_FEATURES,
    ADDON_VERSIONS,
    DCGM_INSTANCE_TYPES,
    POD_IDENTITY,
    AddonPin,
    addon_version_for,
    configuration_settings,
)
from components.catalog.operations import OBSERVABILITY_ADDON
from components.catalog.platform import EKS_ADDONS
from stacks.config import load_config
from stacks.config.addons import DCGM, AddonNeed
from stacks.mocked import Registration
from stacks.plan import Plan, build_plan
from stacks.plan.checklist import plan_addon_needs
from tests.harness import PROJECT, Program, stack_config, stack_names
from tests.variants import HELD_OUT, held_out_program, stress_config, stress_program

ADDON = "aws:eks/addon:Addon"
INVOKE = "aws:eks/getAddonVersion:getAddonVersion"

CASES: list[tuple[str, Callable[[Any], Program], Callable[[], dict[str, Any]], str]] = [
    *((f"{s}", lambda pf, s=s: pf(s, False), lambda s=s: stack_config(s), s) for s in stack_names()),
    *((f"{s}-stress", lambda pf, s=s: stress_program(s), lambda s=s: stress_config(s), s) for s in stack_names()),
    *((f"held-out-{n}", lambda pf, n=n: held_out_program(n), lambda n=n: dict(HELD_OUT[n]), n) for n in HELD_OUT),
]

#: Every case, as a test's parameter ``case``: (its name, its program, its configuration, its stack).
EVERY_CASE = pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])


def used_settings(inputs: dict[str, Any]) -> set[str]:
    """What one registered add-on passes that depends on its version (a configuration key without a version fact
    raises KeyError)."""
    name = inputs["addonName"]
    used = set()
    if inputs.get("configurationValues"):
        used |= configuration_settings(name, json.loads(inputs["configurationValues"]))
    if inputs.get("podIdentityAssociations"):
        if f"{name}:{POD_IDENTITY}" not in ADDON_FEATURES:
            raise KeyError(f"{name}: {POD_IDENTITY} has no version fact")
        used.add(POD_IDENTITY)
    return used


def addon_problems(program: Program, config: dict[str, Any], stack: str) -> list[str]:
    """What is wrong with the add-ons ``program`` registered for the stack ``config``."""
    return registered_problems(program.registrations, program.invokes, build_plan(load_config(PROJECT, stack, config)))


def registered_problems(
    registrations: list[Registration], invokes: list[tuple[str, dict[str, Any]]], plan: Plan
) -> list[str]:
    cfg = plan.config
    k8s = cfg.cluster.kubernetes_version
    needs: dict[str, list[AddonNeed]] = {}
    for n in plan_addon_needs(plan):
        needs.setdefault(n.addon, []).append(n)
    gpu_types = sorted({t for g in plan.groups.values() if g.profile.gpus for t in g.instance_types})
    invoked = {(a.get("addonName"), a.get("kubernetesVersion")) for tok, a in invokes if tok == INVOKE}
    problems = []
    addons = [r for r in registrations if r.type == ADDON]
    assert addons, f"{cfg.stack} registers no add-on"
    for reg in addons:
        name, version = reg.inputs["addonName"], reg.inputs.get("addonVersion")
        try:
            used = used_settings(reg.inputs)
        except KeyError as exc:
            problems.append(f"{reg.name}: {exc}")
            continue
        checked = {n.setting for n in needs.get(name, [])}
        unchecked = used - checked
        if unchecked:
            problems.append(f"{reg.name}: {sorted(unchecked)} are passed but not among what the rules check")
        expected = addon_version_for(name, k8s, cfg.cluster.addon_versions)
        if expected is None:
            # EKS's default: read at deploy time, and checked by the preflight the stack runs (unless it opts out)
            if (name, k8s) not in invoked:
                problems.append(f"{reg.name}: no pin, yet no getAddonVersion({name}, {k8s}) resolved its version")
            if (used or name in DCGM_INSTANCE_TYPES) and not cfg.preflight.enabled:
                problems.append(f"{reg.name}: EKS's default version is unchecked (preflight off, no pin)")
            continue
        if version != expected:
            problems.append(f"{reg.name}: registers {version}, the stack gets {expected}")
        for setting in sorted(used):
            if not ADDON_FEATURES[f"{name}:{setting}"].supports(expected):
                problems.append(f"{reg.name}: {expected} lacks {setting}")
        coverage = DCGM_INSTANCE_TYPES.get(name)
        for t in gpu_types if coverage else []:
            assert coverage is not None
            if coverage.covers(t, expected) is False:
                problems.append(f"{reg.name}: {expected} runs no DCGM DaemonSet on {t}")
            if t in coverage.instance_types and f"{DCGM}{t}" not in checked:
                problems.append(f"{reg.name}: the DCGM DaemonSet on {t} is not among what the rules check")
    return problems


@EVERY_CASE
def test_every_version_dependent_setting_is_at_a_version_that_has_it(program_for: Any, case: tuple[Any, ...]) -> None:
    _, program_of, config_of, stack = case
    found = addon_problems(program_of(program_for), config_of(), stack)
    assert not found, "\n".join(found)


def _with(program: Program, addon: str, **inputs: Any) -> list[Registration]:
    """The program's registrations with one add-on's inputs changed."""
    return [
        dataclasses.replace(r, inputs={**r.inputs, **inputs})
        if r.type == ADDON and r.inputs["addonName"] == addon
        else r
        for r in program.registrations
    ]


def test_the_check_catches_each_kind_of_unsupported_setting(program_for: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the p6-b200 stack's add-ons registered at versions that lack what they are passed, or passed a key
    with no version fact, are each caught."""
    program = program_for("p6-b200", False)
    plan = build_plan(load_config(PROJECT, "p6-b200", stack_config("p6-b200")))
    assert registered_problems(program.registrations, program.invokes, plan) == []

    # this project's pins lacking what the program passes (the rules would refuse such a pin: it is patched in here)
    monkeypatch.setitem(ADDON_VERSIONS["vpc-cni"], "1.36", AddonPin(version="v1.13.0-eksbuild.1", sources=()))
    monkeypatch.setitem(
        ADDON_VERSIONS, OBSERVABILITY_ADDON, {"1.36": AddonPin(version="v5.2.3-eksbuild.1", sources=())}
    )
    old = _with(program, "vpc-cni", addonVersion="v1.13.0-eksbuild.1")
    old = [
        dataclasses.replace(r, inputs={**r.inputs, "addonVersion": "v5.2.3-eksbuild.1"})
        if r.type == ADDON and r.inputs["addonName"] == OBSERVABILITY_ADDON
        else r
        for r in old
    ]
    found = "\n".join(registered_problems(old, program.invokes, plan))
    assert "v1.13.0-eksbuild.1 lacks configurationValues.enableNetworkPolicy" in found
    assert "v5.2.3-eksbuild.1 runs no DCGM DaemonSet on p6-b200.48xlarge" in found
    monkeypatch.undo()

    # a registered version other than the one the stack gets
    found = "\n".join(
        registered_problems(_with(program, "vpc-cni", addonVersion="v1.23.1-eksbuild.1"), program.invokes, plan)
    )
    assert "registers v1.23.1-eksbuild.1, the stack gets v1.22.4-eksbuild.3" in found
    # a configuration key, or a Pod Identity association, with no version fact
    found = "\n".join(
        registered_problems(
            _with(program, "vpc-cni", configurationValues=json.dumps({"env": {}})), program.invokes, plan
        )
    )
    assert "configuration key env has no version fact" in found
    found = "\n".join(
        registered_problems(
            _with(program, "coredns", podIdentityAssociations=[{"serviceAccount": "coredns"}]), program.invokes, plan
        )
    )
    assert "coredns: podIdentityAssociations has no version fact" in found
    # EKS's default, never resolved
    found = "\n".join(registered_problems(program.registrations, [], plan))
    assert "no pin, yet no getAddonVersion(eks-node-monitoring-agent, 1.36)" in found


@EVERY_CASE
def test_the_plan_names_the_addons_the_program_installs(program_for: Any, case: tuple[Any, ...]) -> None:
    """``Plan.addons``, which the upgrade summary reads, is exactly the add-ons the program registers, in order."""
    _, program_of, config_of, stack = case
    plan = build_plan(load_config(PROJECT, stack, config_of()))
    registered = {r.inputs["addonName"] for r in program_of(program_for).of_type(ADDON)}
    assert plan.addons == tuple(a for a in EKS_ADDONS if a in registered)
    assert set(plan.addons) == registered
