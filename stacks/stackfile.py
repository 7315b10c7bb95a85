"""Reading a stack's ``Pulumi.<stack>.yaml`` outside of ``pulumi up`` (the command-line tools)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import pulumi
import yaml

from stacks.config import NAMESPACE, ConfigError, load_config

if TYPE_CHECKING:
    from stacks.plan import Plan

REPO = Path(__file__).resolve().parent.parent


class StackFileError(Exception):
    """The stack file cannot be read."""


def project_name(stack_file: Path) -> str:
    """The project's name from the ``Pulumi.yaml`` beside the stack file (default ``eks-training``)."""
    project_file = stack_file.parent / "Pulumi.yaml"
    if project_file.exists():
        data = yaml.safe_load(project_file.read_text()) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return NAMESPACE


def read_stack_config(stack: str, stack_file: Optional[Path] = None) -> tuple[Path, dict[str, Any]]:
    """The stack file's path and its ``config:`` mapping (``Pulumi.<stack>.yaml`` in the repository by default)."""
    path = stack_file or REPO / f"Pulumi.{stack}.yaml"
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise StackFileError(f"cannot read {path}: {exc}") from exc
    config = data.get("config") if isinstance(data, dict) else None
    return path, dict(config or {})


def use_stack_config(config: dict[str, Any]) -> None:
    """Make ``config`` the Pulumi configuration this process sees (as ``pulumi up`` would pass it)."""
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}, [])


class StackLoadError(Exception):
    """A stack that cannot be planned: its text is what the command-line tools print (then exit 2)."""


def plan_stack(stack: str, stack_file: Optional[Path] = None, *, region: Optional[str] = None) -> tuple[dict[str, Any], "Plan"]:
    """The stack's configuration and plan, offline, as ``pulumi up`` validates it: the stack file read (``region``
    replaces its ``aws:region``), made this process's Pulumi configuration, loaded and planned. Raises
    :class:`StackLoadError` with the message to print (``error: cannot read ...``, or every problem of the
    configuration)."""
    from stacks.plan import build_plan  # the plan package's CLI imports this module

    try:
        path, config = read_stack_config(stack, stack_file)
    except StackFileError as exc:
        raise StackLoadError(f"error: {exc}") from exc
    if region:
        config["aws:region"] = region
    use_stack_config(config)
    try:
        return config, build_plan(load_config(project_name(path), stack))
    except ConfigError as exc:
        raise StackLoadError(str(exc)) from exc
