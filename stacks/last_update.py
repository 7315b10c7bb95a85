"""What ``pulumi up`` changes since the stack's last update, said before the first change.

Each update exports the configuration it was given (:data:`CONFIG_OUTPUT`, a secret output). The next update reads
it back from the stack's own outputs, plans it as ``python -m stacks plan --from`` does, and prints that summary when
nodes roll, the Kubernetes minor moves or add-ons change. A move EKS refuses (a skipped minor, a downgrade, a kubelet
outside the skew) fails before any resource is registered.
"""

import json
from typing import Any, Mapping, Optional

import pulumi

from stacks.config import ConfigError, load_config
from stacks.plan import Plan, build_plan
from stacks.plan.upgrade import compare, render_upgrade, upgrade_report

#: The stack output that holds the configuration an update was given.
CONFIG_OUTPUT = "deployedConfiguration"
#: The engine's built-in function that returns a stack's outputs (what ``pulumi.StackReference`` reads), called
#: synchronously so the answer comes before anything is registered (pulumi/pulumi
#: ``pkg/resource/deploy/builtins.go``).
READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
#: How the summary names the configuration it compares with.
LAST_UPDATE = "the stack's last `pulumi up`"


def configuration_output(config: Mapping[str, Any]) -> pulumi.Output[str]:
    """The configuration this update was given, as the secret JSON the next update reads back."""
    return pulumi.Output.secret(json.dumps(dict(config), sort_keys=True))


def stack_name() -> str:
    """This stack's fully qualified name (``organization/project/stack``)."""
    return f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"


def last_configuration() -> Optional[dict[str, Any]]:
    """The configuration the stack's last update exported (``None`` before the first, or from a version of this
    project that did not export it)."""
    result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": stack_name()})
    outputs = (result.value or {}).get("outputs") or {}
    raw = outputs.get(CONFIG_OUTPUT)
    return json.loads(raw) if isinstance(raw, str) else None


def upgrade_summary(plan: Plan, previous: Mapping[str, Any]) -> Optional[str]:
    """What moving from ``previous`` (the last update's configuration) to ``plan`` does, as
    :func:`stacks.plan.upgrade.render_upgrade` writes it; ``None`` when nothing rolls and no version moves.
    :class:`ConfigError` when the move breaks an upgrade rule."""
    config = plan.config
    try:
        old = build_plan(load_config(config.project, config.stack, dict(previous)))  # in the working folder
    except ConfigError as exc:
        return (
            f"{LAST_UPDATE} was given a configuration this version of the project does not load, so what this update "
            f"rolls is not shown ({exc}). Compare by hand: python -m stacks plan --stack {config.stack} --from <the "
            "revision of its stack file that was deployed>"
        )
    upgrade = compare(old, plan, LAST_UPDATE)
    if not upgrade.groups and not upgrade.addons and upgrade.old_minor == upgrade.new_minor:
        return None
    return render_upgrade(upgrade_report(upgrade))


def announce_upgrade(plan: Plan) -> None:
    """Print :func:`upgrade_summary` against the stack's last update as a warning, before anything is registered;
    a broken upgrade rule raises :class:`ConfigError`."""
    try:
        previous = last_configuration()
    except Exception as exc:  # noqa: BLE001 - the summary is advice: an unreadable stack must not stop the update
        pulumi.log.warn(
            f"cannot read {LAST_UPDATE}'s configuration ({exc}), so what this update rolls is not shown; "
            f"python -m stacks plan --stack {plan.config.stack} --from <the deployed stack file> shows it"
        )
        return
    if previous is None:
        return
    summary = upgrade_summary(plan, previous)
    if summary is not None:
        pulumi.log.warn(summary)
