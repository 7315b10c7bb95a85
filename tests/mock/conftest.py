"""The mock tier's shared fixtures."""

from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness import STACK_OUTPUTS
from tests.last_update_support import SELF


@pytest.fixture()
def last_outputs() -> Iterator[dict[str, Any]]:
    """The outputs of the dev stack's last update, as the engine would return them (empty: no update yet)."""
    outputs: dict[str, Any] = {}
    STACK_OUTPUTS[SELF] = outputs
    yield outputs
    STACK_OUTPUTS.pop(SELF, None)
