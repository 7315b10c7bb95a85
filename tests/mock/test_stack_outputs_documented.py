"""Every output a stack exports is in the outputs reference (``docs/reference/outputs.md``, generated from the
``Outputs:`` list of :func:`stacks.outputs.export_outputs`' docstring): each preset's outputs, and each job's fields of
the ``jobs`` output, evaluated by the real program under mocks. An output added without its line fails here. (A
jobs-only stack's outputs: ``tests/mock/test_jobs_only.py``.)"""

import pytest

from stacks.docs.stack_outputs import EXPORTERS, documented_outputs
from tests.harness import run_program, stack_names

CLUSTER = documented_outputs(*EXPORTERS["A cluster stack"])


def test_the_documented_outputs_are_the_ones_exported_somewhere() -> None:
    exported = set()
    for stack in stack_names():
        program = run_program(stack)
        exported |= set(program.outputs)
        exported |= {f"jobs.<job>.{k}" for job in program.outputs.get("jobs", {}).values() for k in job}
    # teams and nodeGroupPlacement come with teams (tests/mock/test_jobs_only.py exports them)
    assert set(CLUSTER) - exported == {"teams", "nodeGroupPlacement"}


@pytest.mark.parametrize("stack", stack_names())
def test_every_output_of_a_preset_is_documented(stack: str) -> None:
    program = run_program(stack)
    assert program.error is None
    assert set(program.outputs) - set(CLUSTER) == set()
    for job, fields in program.outputs.get("jobs", {}).items():
        assert {f"jobs.<job>.{k}" for k in fields} - set(CLUSTER) == set(), job
