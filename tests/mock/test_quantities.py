"""Every quantity the program writes in a Kubernetes object is in the form the API server writes back.

pulumi-kubernetes compares a new input with the live object. It writes a built-in object's inputs in canonical form
itself (``normalizeInputs``, https://github.com/pulumi/pulumi-kubernetes/blob/v4.34.2/provider/pkg/provider/provider.go),
but not a custom resource's, which a webhook that changes it (controller-runtime's defaulter, as Kueue's) writes
back in canonical form: ``65536Mi`` as ``64Gi``, a difference at every ``pulumi up``, and a replacement for an
MPIJob. The canonical form below is apimachinery's ``Quantity.CanonicalizeBytes``
(https://github.com/kubernetes/apimachinery/blob/v0.36.3/pkg/api/resource/quantity.go), written here apart from the
program's own :mod:`components.quantities`. The cluster tier reads every preset's objects back from a real API
server (``tests/cluster/test_box_apiserver.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import Program, stack_names
from tests.quantities import canonical, quantities
from tests.variants import HELD_OUT, held_out_program

pytestmark = pytest.mark.mock


def test_the_canonical_form_is_the_api_servers() -> None:
    """apimachinery's own cases (v0.36.3 quantity_test.go: TestQuantityParseEmit, and TestQuantityString's
    alternates), and the sizes this program writes."""
    cases = {
        "1Ki": "1Ki",
        "1024Mi": "1Gi",
        "1000M": "1G",
        ".001Ki": "1024m",
        "307200Ki": "300Mi",
        "1025024Mi": "1001Gi",
        "1024Gi": "1Ti",
        "5000m": "5",
        "0.5": "500m",
        "0.001T": "1G",
        "1000u": "1m",
        "1.08": "1080m",
        "1080000000n": "1080m",
        "1025": "1025",
        "3k": "3k",
        "0": "0",
        "65536Mi": "64Gi",
        "1536Mi": "1536Mi",
        "153100m": "153100m",
        "0Mi": "0",
    }
    assert {q: canonical(q) for q in cases} == cases


def problems(program: Program) -> list[str]:
    found = []
    for r in program.registrations:
        if not r.type.startswith("kubernetes:") or r.type.startswith("kubernetes:helm.sh/"):
            continue
        for path, value in quantities(r.inputs):
            if canonical(value) != value:
                found.append(f"{r.type} {r.name} {path}: {value!r}, which the API server writes {canonical(value)!r}")
    return found


@pytest.mark.parametrize("stack", stack_names())
def test_every_quantity_a_stack_registers_is_canonical(program_for: Any, stack: str) -> None:
    program = program_for(stack, False)
    assert any(True for r in program.registrations for _ in quantities(r.inputs)), "no quantity found"
    assert problems(program) == []


@pytest.mark.parametrize("name", sorted(HELD_OUT))
def test_every_quantity_a_held_out_stack_registers_is_canonical(name: str) -> None:
    assert problems(held_out_program(name)) == []
