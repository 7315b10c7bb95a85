"""The Pulumi program: validate the stack's config, plan it, check the AWS account, then build the
training environment and launch the workloads. Nothing is registered until the checks pass.

A jobs-only stack (``cluster.stackReference``) registers only its jobs, on its team's queue of the cluster another
stack made (:mod:`stacks.jobs_only`)."""

from pathlib import Path

import pulumi

from stacks.config import ConfigError, all_config, load_config
from stacks.environment import available_zones, build_environment, region_zones, resolve_zones
from stacks.jobs_only import build_jobs_only
from stacks.last_update import (
    PREFLIGHT_OFF,
    announce_jobs_only_update,
    announce_upgrade,
    desired_size_notes,
    read_last_update,
    refuse_new_region,
    resize_warning,
)
from stacks.outputs import export_outputs
from stacks.plan import build_plan
from stacks.plan.admission import topology_region_problems
from stacks.plan.group_changes import resized_groups
from stacks.plan.unread import unread_entries
from stacks.preflight import check
from stacks.preflight.cluster import desired_sizes_now, eks_defaults, running_cluster
from stacks.stackfile import secret_problem, secret_settings, stray_top_level_keys
from stacks.workloads import build_workloads

settings = all_config()
if secret := secret_settings(settings, pulumi.runtime.is_config_secret):
    raise ConfigError([secret_problem(secret, offline=False)])  # plain text in the state otherwise: nothing registered
if stray := stray_top_level_keys(Path(pulumi.get_root_directory() or Path.cwd()), pulumi.get_stack(), settings):
    raise ConfigError(stray)  # keys Pulumi ignores in the stack file: nothing registered
config = load_config(pulumi.get_project(), pulumi.get_stack(), settings)  # ConfigError: nothing registered
plan = build_plan(config)
for note in unread_entries(plan):  # a dataset or image nothing reads: said, not ignored
    pulumi.log.warn(note)
if topology_problems := topology_region_problems(plan, config.region):
    raise ConfigError(topology_problems)  # a topology-aware group where EC2 labels no node: nothing registered
if config.jobs_only:
    # what this update changes since the last (a cluster stack's, maybe); ConfigError: nothing registered
    announce_jobs_only_update(plan, read_last_update())
    if config.preflight.enabled:
        check(plan, None)  # the AWS CLI its kubeconfig runs (PreflightError): nothing registered
    outputs = build_jobs_only(plan, settings)
else:
    last = read_last_update()  # the stack's outputs and the configuration its last update recorded
    refuse_new_region(plan, last)  # ConfigError before AWS is asked anything in the new region: nothing registered
    # (minor, status) of the cluster if it runs, and why EKS could not be asked
    running, unread = running_cluster(plan) if config.preflight.enabled else (None, PREFLIGHT_OFF)
    # (the version it runs, EKS's default now) of each add-on left to EKS's default, which this update moves to
    addons, unasked = eks_defaults(plan) if running is not None else (None, None)
    if unasked is not None:
        pulumi.log.warn(f"could not read the cluster's add-ons ({unasked}): a default EKS raised is not shown")
    available = available_zones() if config.network is not None else None
    # what this update rolls since the last; ConfigError (a skipped minor, another VPC or zones): nothing registered
    previous = announce_upgrade(plan, last, running[0] if running else None, unread, region_zones(available), addons)
    zones = resolve_zones(config, available) if available is not None else None
    if config.preflight.enabled:
        # raises PreflightError (quota, zone, reservation, EFA): nothing registered; the vCPU quotas count the last
        # update's groups that run until the end of this one
        check(plan, zones, previous=previous)
    # the desired size EKS holds for each group whose sizes move under the autoscaler: sent with its new sizes, where
    # the provider would send the one Pulumi recorded (and EKS scale the group to it at once)
    resized = resized_groups(previous, plan) if previous is not None else ()
    desired, unsized = desired_sizes_now(plan, resized) if config.preflight.enabled else ({}, PREFLIGHT_OFF)
    if unsized_groups := [n for n in resized if n not in desired]:
        pulumi.log.warn(resize_warning(plan, unsized_groups, unsized))
    for note in desired_size_notes(plan, desired):
        pulumi.log.info(note)
    environment = build_environment(plan, zones, desired)
    environment.workloads = build_workloads(environment)
    outputs = export_outputs(environment, settings)
for output_name, value in outputs.items():
    pulumi.export(output_name, value)
