"""The Pulumi program: validate the stack's config, check the AWS account, then build the training
environment and launch the workloads. Nothing is registered until both checks pass."""

import pulumi

from stacks.config import load_config
from stacks.environment import (
    build_environment,
    build_workloads,
    export_outputs,
    resolve_zones,
)
from stacks.preflight import check

config = load_config(pulumi.get_project(), pulumi.get_stack())  # raises ConfigError: nothing registered
zones = resolve_zones(config) if config.network is not None else None
if config.preflight.enabled:
    check(config, zones)  # raises PreflightError (quota, zone, reservation, EFA): nothing registered
environment = build_environment(config, zones)
environment.workloads = build_workloads(environment)
for output_name, value in export_outputs(environment).items():
    pulumi.export(output_name, value)
