"""A decimal setting written by ``pulumi config set --path`` reaches the program as a string ("integers are treated as
numbers. All other values are treated as strings", https://www.pulumi.com/docs/iac/cli/commands/pulumi_config_set/):
the config reads such a string as its number (``stacks.config.base.Number``), and still refuses a word or a boolean
with the value to write."""

from typing import Any

import pytest

from stacks.config import ConfigError, load_config
from tests.harness import PROJECT, stack_config


def _with_timeout(value: Any) -> dict[str, Any]:
    cfg = stack_config("dev")
    jobs = cfg[f"{PROJECT}:jobs"]
    jobs[next(iter(jobs))]["timeoutHours"] = value
    return cfg


@pytest.mark.parametrize(("written", "read"), [("12.5", 12.5), (" 0.5 ", 0.5), ("1e1", 10.0), (12.5, 12.5), (6, 6.0)])
def test_a_decimal_the_cli_stored_as_a_string_is_its_number(written: Any, read: float) -> None:
    cfg = load_config(PROJECT, "dev", _with_timeout(written))
    assert next(iter(cfg.jobs.values())).timeout_hours == read


@pytest.mark.parametrize(
    ("written", "says"),
    [("twelve", "'twelve' is not a number"), (True, "timeoutHours"), ("12.5h", "'12.5h' is not a number")],
)
def test_anything_else_is_still_refused_naming_the_key(written: Any, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(PROJECT, "dev", _with_timeout(written))
    assert says in str(err.value) and "timeoutHours" in str(err.value)
