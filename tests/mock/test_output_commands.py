"""The commands a stack exports for its jobs (``jobs.<job>.waitCommand``, ``copyCommand``...) never wait without
end: every ``kubectl wait`` in them has a timeout, and none waits for a condition that a failed job never gets (a
Job's ``Complete``, an MPIJob's ``Succeeded``), which kept a failed job's waitCommand waiting for 24 hours. Every
preset, evaluated by the real program under mocks."""

import re

import pytest

from components.workloads.job_objects import JOB_OBJECTS
from tests.harness import resolve, run_program, stack_names

#: The conditions only a job that succeeded gets.
SUCCESS_ONLY = sorted({obj.succeeded for obj in JOB_OBJECTS.values()})


@pytest.mark.parametrize("stack", stack_names())
def test_every_wait_in_a_jobs_commands_ends(stack: str) -> None:
    program = run_program(stack)
    jobs = resolve(program.outputs.get("jobs")) or {}
    waits = 0
    for job, fields in jobs.items():
        for name, value in fields.items():
            text = resolve(value)
            if not isinstance(text, str):
                continue
            for wait in re.findall(r"kubectl wait [^;&|]*", text):
                waits += 1
                assert re.search(r"--timeout=\d+[smh]\b", wait), (job, name, wait)
                for condition in SUCCESS_ONLY:
                    assert f"--for=condition={condition}" not in wait, (job, name, wait)
    assert waits >= 2 * len(jobs)  # each job's waitCommand and copyCommand wait
