"""The Pulumi program: validate the stack's config, then build the training environment."""

import pulumi

from stacks.config import load_config
from stacks.environment import build_environment, build_workloads, export_outputs, resolve_zones

config = load_config(pulumi.get_project(), pulumi.get_stack())  # raises before any resource is registered
zones = resolve_zones(config) if config.network is not None else None
environment = build_environment(config, zones)
environment.workloads = build_workloads(environment)
for output_name, value in export_outputs(environment).items():
    pulumi.export(output_name, value)
