"""The Pulumi program: validate the stack's config, plan it, check the AWS account, then build the
training environment and launch the workloads. Nothing is registered until the checks pass."""

import pulumi

from stacks.config import load_config
from stacks.environment import build_environment, resolve_zones
from stacks.outputs import export_outputs
from stacks.plan import build_plan
from stacks.preflight import check
from stacks.workloads import build_workloads

config = load_config(pulumi.get_project(), pulumi.get_stack())  # raises ConfigError: nothing registered
plan = build_plan(config)
zones = resolve_zones(config) if config.network is not None else None
if config.preflight.enabled:
    check(plan, zones)  # raises PreflightError (quota, zone, reservation, EFA): nothing registered
environment = build_environment(plan, zones)
environment.workloads = build_workloads(environment)
for output_name, value in export_outputs(environment).items():
    pulumi.export(output_name, value)
