"""Importing the mocks a program's own tests use (``TrainingMocks``, docs/how-to/components.md) leaves the Pulumi SDK
as it was: the evaluation that turns its stack traces off does so when it runs, not at import."""

import subprocess
import sys
from pathlib import Path

from tests.wait import patient

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
from pulumi.runtime import resource
before = resource._get_stack_trace
from stacks.mocked import TrainingMocks
assert resource._get_stack_trace is before, "importing stacks.mocked patched the SDK"
import stacks.mocked
stacks.mocked._no_stack_traces()
assert resource._get_stack_trace is not before, "the check cannot see a patch"
"""


def test_importing_the_mocks_changes_nothing_in_the_sdk() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=patient(120))
    assert done.returncode == 0, done.stderr
