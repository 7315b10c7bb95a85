"""Read every ``eks-training:*`` key and validate the configuration as a whole.

:func:`load_config` runs before the program registers any resource. Each top-level key is validated by
its model (:data:`SECTIONS`; a map's entries by :data:`ENTRIES`), then the rules across sections run
(:mod:`stacks.config.rules`). All problems
are collected and raised as one :class:`~stacks.config.errors.ConfigError` naming each bad key. The AWS
provider's settings the image builds need (``aws:profile``, ``aws:assumeRoles``, ...) are read and checked
here too (:func:`components.image.aws_settings.aws_settings_from_config`).
"""

import difflib
import functools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import pulumi
from pydantic import BaseModel

from components.catalog import INSTANCE_TYPES, Catalog, InstanceType
from components.image.aws_settings import AwsSettings, AwsSettingsError, aws_settings_from_config
from stacks.bundle import REFERENCE, context_folder
from stacks.config.base import ENTRY_NAME_MAX
from stacks.config.benchmark import (
    BenchmarkConfig,
    BenchmarkSettings,
    benchmark_settings,
    experiment_path,
    run_id,
    validate_experiments,
)
from stacks.config.cluster import ClusterConfig
from stacks.config.datasets import DatasetConfig
from stacks.config.errors import NAMESPACE, ConfigError, key, switch_fix, validate
from stacks.config.images import ImageBuildConfig, ImageConfig
from stacks.config.instance_facts import InstanceFactsConfig
from stacks.config.jobs import TOOLBOX_IMAGE, JobConfig, with_group_defaults
from stacks.config.namespaces import (
    as_passed,
    disabled_providers_problem,
    provider_settings,
    region_problems,
    setting,
    unread_keys,
)
from stacks.config.network import ExistingVpcConfig, NetworkConfig
from stacks.config.nodegroups import NodeGroupConfig, SystemNodeGroupConfig
from stacks.config.operations import OperationsConfig
from stacks.config.rules import CLUSTER_NAME_MAX, Sections
from stacks.config.rules import check as check_rules
from stacks.config.rules.network import zone_refs
from stacks.config.settings import AutoscalerConfig, PreflightConfig
from stacks.config.storage import StorageConfig
from stacks.config.teams import TeamConfig
from stacks.config.tree import homes, section_keys

#: Every top-level key of the ``eks-training`` namespace and what it holds: a model (an object), ``str``
#: (a string) or ``dict`` (a map of entries validated one by one).
SECTIONS: Mapping[str, Any] = {
    "clusterName": str,
    "network": NetworkConfig,
    "existingVpc": ExistingVpcConfig,
    "cluster": ClusterConfig,
    "systemNodeGroup": SystemNodeGroupConfig,
    "nodeGroups": dict,
    "storage": StorageConfig,
    "instanceFacts": dict,
    "tags": dict,
    "images": dict,
    "imageBuild": ImageBuildConfig,
    "datasets": dict,
    "jobs": dict,
    "preflight": PreflightConfig,
    "autoscaler": AutoscalerConfig,
    "benchmark": BenchmarkConfig,
    "operations": OperationsConfig,
    "teams": dict,
}

#: What each top-level key is, one sentence (the reference, docs/reference/configuration.md, and Pulumi.yaml's
#: ``config:`` are generated from it and the models by ``python -m stacks.docs``).
SECTION_SUMMARIES: Mapping[str, str] = {
    "clusterName": f"The EKS cluster's name: 1-{CLUSTER_NAME_MAX} lowercase letters, digits and '-'.",
    "network": "A new VPC (omit to use the defaults, or set existingVpc instead).",
    "existingVpc": "Deploy into an existing VPC instead of creating one; mutually exclusive with network.",
    "cluster": "The EKS control plane.",
    "systemNodeGroup": "The on-demand CPU node group for add-ons and controllers.",
    "nodeGroups": "The worker node groups, by name.",
    "storage": "The shared file system every job mounts at /data: EFS (default) or FSx for Lustre.",
    "instanceFacts": "Facts for instance types the built-in catalog (components/catalog/instances.py) does not know, "
    "by EC2 type name, as `aws ec2 describe-instance-types` reports them.",
    "tags": "AWS tags added to every resource (tag name -> string value).",
    "images": "The container images the jobs run, by name: built by AWS CodeBuild from a folder, or prebuilt.",
    "imageBuild": "How images are built.",
    "datasets": "Datasets staged onto the shared volume once and shared by the jobs that name them, by name.",
    "jobs": "The jobs `pulumi up` runs, by name, each queued in Kueue; default: no jobs (the environment only).",
    "preflight": "Account checks before anything is created (`python -m stacks preflight --stack NAME` runs them "
    "alone).",
    "autoscaler": "cluster-autoscaler: worker groups scale between minSize and maxSize, from zero.",
    "benchmark": "A benchmark run, driven by `python -m stacks benchmark --stack NAME` (up, follow, collect, summary, "
    "destroy).",
    "operations": "Running the fleet: metrics, the dashboard and the alarms (node repair is per node group).",
    "teams": "Teams sharing the cluster, by name: each a namespace, a ClusterQueue in one cohort and a LocalQueue, "
    "with its share of the fleet; their jobs come from jobs-only stacks (cluster.stackReference, cluster.team).",
}


def _json_or_text(value: str) -> Any:
    """A setting as the program reads it: an object or list (Pulumi passes them as JSON), else the text."""
    try:
        return json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value


@functools.cache
def _section_keys() -> tuple[tuple[str, str], ...]:
    return section_keys(SECTIONS, ENTRIES)


def _home_hint(name: str) -> str:
    """Where a top-level key nothing reads belongs: in a section (``kubernetesVersion`` in ``cluster``), or the AWS
    provider's namespace (``region``); ``""`` when it is neither."""
    where = [key(p) for p in homes(name, _section_keys())]
    if not where and name in provider_settings("aws"):
        where = [f"aws:{name}"]
    return f"did you mean {' or '.join(where)}? move it there; " if where else ""


def default_cluster_name(project: str, stack: str) -> str:
    """The cluster's name when ``clusterName`` is not set."""
    return f"{project}-{stack}"


#: Map sections: their entries' model.
ENTRIES: Mapping[str, type[BaseModel]] = {
    "nodeGroups": NodeGroupConfig,
    "instanceFacts": InstanceFactsConfig,
    "images": ImageConfig,
    "datasets": DatasetConfig,
    "jobs": JobConfig,
    "teams": TeamConfig,
}

#: The image every stack has unless it names its own under the same key.
DEFAULT_IMAGES: Mapping[str, ImageConfig] = {TOOLBOX_IMAGE: ImageConfig(context="training")}


@dataclass(frozen=True)
class StackConfig:
    """The validated configuration of one stack."""

    project: str
    stack: str
    cluster_name: str
    network: Optional[NetworkConfig]
    existing_vpc: Optional[ExistingVpcConfig]
    cluster: ClusterConfig
    system_node_group: SystemNodeGroupConfig
    node_groups: Mapping[str, NodeGroupConfig]
    storage: StorageConfig
    catalog: Catalog
    tags: Mapping[str, str]
    images: Mapping[str, ImageConfig]
    image_build: ImageBuildConfig
    datasets: Mapping[str, DatasetConfig]
    jobs: Mapping[str, JobConfig]
    """Jobs in config order, with their group defaults (:func:`stacks.config.jobs.with_group_defaults`)."""
    preflight: PreflightConfig
    autoscaler: AutoscalerConfig
    aws: AwsSettings
    """The stack's AWS provider settings the image builds run with (``aws:profile``, ``aws:assumeRoles``, ...)."""
    benchmark: Optional[BenchmarkSettings] = None
    """The benchmark (``None`` without the section); its experiments are jobs of :attr:`jobs`."""
    image_folders: Mapping[str, Path] = field(default_factory=dict)
    """The folder each built image is built from (:func:`stacks.bundle.context_folder`)."""
    operations: OperationsConfig = field(default_factory=OperationsConfig)
    """Metrics, dashboard and alarms (node repair is per group)."""
    code_folders: Mapping[str, Path] = field(default_factory=dict)
    """Job -> the folder of the project its ``code`` names (uploaded by the program); jobs with ``s3://`` code or
    none are not in it."""
    teams: Mapping[str, TeamConfig] = field(default_factory=dict)
    """Teams sharing the cluster (:mod:`stacks.config.teams`), in config order."""

    def instance(self, name: str) -> InstanceType:
        """Catalog facts for ``name`` (validated to exist)."""
        return self.catalog.require(name)

    @property
    def jobs_only(self) -> bool:
        """Whether the stack runs jobs on another stack's cluster (``cluster.stackReference``): it makes no cluster,
        network, node group or storage of its own."""
        return self.cluster.stack_reference is not None

    @property
    def region(self) -> str:
        """The stack's AWS region, ``aws:region`` (the loader refuses a stack without one: :func:`region_problems`)."""
        return str(self.aws["region"])


def all_config() -> dict[str, Any]:
    """Every setting this process's Pulumi configuration holds (every namespace), keyed as Pulumi passes them."""
    merged: dict[str, Any] = {}
    merged.update(pulumi.runtime.config.get_config_env())
    merged.update(pulumi.runtime.config.CONFIG.get())
    return merged


#: An object section with nothing after its key (Pulumi passes ``""``; inside an object, JSON null).
EMPTY_OBJECT = "null (an empty value): give its keys, or remove it"


def _not_a_section(name: str, kind: Any, value: Any) -> str:
    """What a section's value is when it is not a mapping, and the fix: its keys as a mapping (``enabled: false``
    where a switch was written as the section's value)."""
    if value is None or value == "":
        return EMPTY_OBJECT
    shown = (
        f"a list {value!r}"
        if isinstance(value, list)
        else json.dumps(value)
        if not isinstance(value, str)
        else repr(value)
    )
    fields = getattr(kind, "model_fields", {})
    if isinstance(value, bool) and "enabled" in fields:
        return f"{shown}: {switch_fix(value, name)}"
    return f"{shown}: write a YAML mapping of its keys (key: value, see {REFERENCE})"


def raw_config(config: Mapping[str, Any]) -> dict[str, str]:
    """All ``eks-training:*`` settings of ``config`` as Pulumi passes them (:func:`as_passed`), keyed without the
    namespace."""
    out: dict[str, str] = {}
    for full, value in config.items():
        ns, sep, k = full.partition(":")
        if sep and ns == NAMESPACE:
            out[k] = as_passed(value)
    return out


#: AWS's rules for a tag (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html#tag-conventions): a
#: key of 1-128 and a value of 0-256 Unicode letters, digits, spaces and ``_ . : / = + - @``; the ``aws:`` prefix is
#: AWS's own (in any case).
_TAG_TEXT = re.compile(r"^[\w .:/=+\-@]*$")


def tag_problems(name: str, value: Any) -> list[str]:
    """Problems with the tag ``tags.<name>: value``, each naming the fix."""
    where = key(f"tags.{name}")
    problems = []
    if value is None:
        problems.append(f"{where}: null (an empty value); write the tag's value, '' for an empty one, or remove it")
    elif not isinstance(value, str):
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        problems.append(f"{where}: tag values must be strings, got {type(value).__name__}; quote it: '{shown}'")
    if name.lower().startswith("aws:"):
        problems.append(f"{where}: the aws: prefix is reserved for AWS's own tags; rename the tag without it")
    if not 1 <= len(name) <= 128 or not _TAG_TEXT.match(name):
        problems.append(f"{where}: a tag key is 1-128 letters, digits, spaces and _ . : / = + - @; rename it")
    if isinstance(value, str) and (len(value) > 256 or not _TAG_TEXT.match(value)):
        problems.append(f"{where}: a tag value is 0-256 letters, digits, spaces and _ . : / = + - @; change it")
    return problems


class _Parser:
    """Collects parsed sections, problems and the paths that failed."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.failed: set[str] = set()

    def model(self, path: str, model: type[BaseModel], value: Any) -> Optional[Any]:
        parsed, problems = validate(path, model, value)
        if problems:
            self.problems.extend(problems)
            self.failed.add(path)
        return parsed

    def sections(self, raw: Mapping[str, str]) -> dict[str, Any]:
        """Each top-level key parsed: a string, a map of entries (parsed by :meth:`entries`) or a section's model."""
        parsed: dict[str, Any] = {}
        for k, value in raw.items():
            kind = SECTIONS.get(k)
            if kind is None:
                near = difflib.get_close_matches(k, list(SECTIONS), n=1, cutoff=0.75) or [
                    s for s in SECTIONS if s.lower() == k.lower()
                ]
                # a section's key written on top as it is spelt there (args: [...], image: NAME) is that key, unless
                # its value is a mapping a section spelt alike would hold (nodeGroup: {cpu: ...}, dataset: {...})
                if near and any(n == k for n, _ in _section_keys()) and not isinstance(_json_or_text(value), dict):
                    near = []
                hint = f"did you mean {near[0]}? rename it; " if near else _home_hint(k)
                self.problems.append(
                    f"{key(k)}: unknown key; {hint}valid keys are {', '.join(sorted(SECTIONS))} (see {REFERENCE})"
                )
                if near and near[0] not in raw:
                    self.failed.add(near[0])  # the section meant is unread: the rules that name its entries stay quiet
                continue
            if kind is str:
                if not value.strip():
                    self.problems.append(
                        f"{key(k)}: empty (null or ''); give it a value, or remove the key for the default"
                    )
                    self.failed.add(k)
                    continue
                parsed[k] = value
                continue
            obj = _json_or_text(value)
            if not isinstance(obj, dict):
                self.problems.append(
                    f"{key(k)}: must be an object (a YAML mapping), got {_not_a_section(k, kind, obj)}"
                )
                self.failed.add(k)
                continue
            if kind is dict:
                parsed[k] = obj
                continue
            section = self.model(k, kind, obj)
            if section is not None:
                parsed[k] = section
        return parsed

    def catalog(self, parsed: Mapping[str, Any]) -> Catalog:
        """The built-in catalog extended by the instance facts the user supplies."""
        types: dict[str, InstanceType] = dict(INSTANCE_TYPES)
        for name, facts in (parsed.get("instanceFacts") or {}).items():
            path = f"instanceFacts.{name}"
            if name in INSTANCE_TYPES:
                self.problems.append(
                    f"{key(path)}: {name} is already in the catalog; remove this entry (or fix components/catalog if a "
                    "fact there is wrong)"
                )
                continue
            f = self.model(path, InstanceFactsConfig, facts)
            if f is not None:
                types[name] = f.to_instance_type(name)
        return Catalog(types)

    def entries(self, parsed: Mapping[str, Any], section: str) -> dict[str, Any]:
        """The entries of a map section that pass their own validation."""
        out: dict[str, Any] = {}
        for name, value in (parsed.get(section) or {}).items():
            entry = self.model(f"{section}.{name}", ENTRIES[section], value)
            if entry is not None:
                out[name] = entry
        return out

    def experiments(
        self, bench: Optional[BenchmarkConfig], jobs: dict[str, JobConfig], job_names: list[str]
    ) -> tuple[str, dict[str, str]]:
        """The benchmark's experiments checked against the jobs and added to them (``jobs`` and ``job_names``); returns
        the run's id and each experiment's config path."""
        if bench is None:
            return "", {}
        run, run_problem = run_id(bench.experiments)
        if run_problem:
            self.problems.append(f"{key('benchmark')}: {run_problem}")
        experiments, found, failed_experiments = validate_experiments(bench.experiments, job_names, run)
        self.problems.extend(found)
        self.failed |= failed_experiments
        job_paths: dict[str, str] = {}
        for name in bench.experiments:
            if name not in job_names:
                job_names.append(name)
                job_paths[name] = experiment_path(name)
        jobs.update({n: j for n, j in experiments.items() if n not in jobs})
        return run, job_paths

    def aws(self, config: Mapping[str, Any]) -> AwsSettings:
        """The AWS provider's settings the image builds read (warnings logged, unless :func:`quiet`)."""
        try:
            aws, warnings = aws_settings_from_config(lambda k: setting(config, f"aws:{k}"))
        except AwsSettingsError as exc:
            self.problems.extend(exc.problems)
            return {}
        for warning in warnings if not _QUIET.get() else ():
            pulumi.log.warn(warning)
        return aws


#: True inside :func:`quiet`.
_QUIET: ContextVar[bool] = ContextVar("quiet", default=False)


@contextmanager
def quiet() -> Iterator[None]:
    """:func:`load_config` logs no warning inside: for a configuration whose warnings were shown when it was current
    (the last update's, :mod:`stacks.last_update`)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def _image_folders(images: Mapping[str, ImageConfig], own: set[str], where: Path) -> dict[str, Path]:
    """The folder each built image builds from: the project's (``where``), else the shipped one of its name."""
    return {
        n: context_folder(i.context, where, default=n not in own) for n, i in images.items() if i.context is not None
    }


def load_config(project: str, stack: str, config: Mapping[str, Any], project_dir: Optional[Path] = None) -> StackConfig:
    """Read and validate the whole stack configuration; raise :class:`ConfigError` on any problem. A plain function
    of its arguments, with no Pulumi runtime: ``config`` is every setting of the stack keyed ``<namespace>:<key>``
    (values as Pulumi passes them, strings with objects as JSON, or as the stack file's YAML has them): the running
    program passes :func:`all_config`, the command-line tools the stack file's
    (:func:`stacks.stackfile.read_stack_config`). ``project_dir`` is the Pulumi project's folder, where image contexts
    are (default: the working folder, as under ``pulumi up``).

    Zone availability in the region is checked later, by :func:`stacks.zones.choose_zones`, once the
    region's zones are known (still before any resource is registered).
    """
    raw = raw_config(config)
    p = _Parser()
    p.problems.extend(unread_keys(config, project, SECTIONS))
    parsed = p.sections(raw)
    sections, run = _sections(p, parsed, raw, config, project, stack, project_dir)
    p.problems.extend(check_rules(sections))
    aws = p.aws(config)
    p.problems.extend(region_problems(config, zone_refs(sections)))
    if p.problems:
        raise ConfigError(p.problems)
    return _stack_config(project, stack, sections, parsed, aws, run)


def _sections(
    p: _Parser,
    parsed: dict[str, Any],
    raw: dict[str, Any],
    config: Mapping[str, Any],
    project: str,
    stack: str,
    project_dir: Optional[Path],
) -> tuple[Sections, str]:
    """The parsed sections with their defaults, as the rules across sections read them, and the benchmark's run;
    each section's own problems go to ``p``."""
    catalog = p.catalog(parsed)
    groups: dict[str, NodeGroupConfig] = p.entries(parsed, "nodeGroups")
    raw_groups = parsed.get("nodeGroups") or {}
    own_images = p.entries(parsed, "images")
    images: dict[str, ImageConfig] = {**DEFAULT_IMAGES, **own_images}
    where = project_dir or Path.cwd()
    image_folders = _image_folders(images, set(own_images), where)
    makes_cluster = (parsed.get("cluster") or ClusterConfig()).stack_reference is None
    disabled = disabled_providers_problem(config, makes_cluster=makes_cluster, builds_images=bool(image_folders))
    p.problems.extend([disabled] if disabled else [])
    datasets: dict[str, DatasetConfig] = p.entries(parsed, "datasets")
    jobs: dict[str, JobConfig] = p.entries(parsed, "jobs")
    job_names = list(parsed.get("jobs") or {})
    bench: Optional[BenchmarkConfig] = parsed.get("benchmark")
    run, job_paths = p.experiments(bench, jobs, job_names)
    for tk, tv in (parsed.get("tags") or {}).items():
        p.problems.extend(tag_problems(str(tk), tv))
    teams = _Parser()  # the teams' own problems are reported after the jobs-only rules
    teams.failed = p.failed
    network: Optional[NetworkConfig] = parsed.get("network")
    existing: Optional[ExistingVpcConfig] = parsed.get("existingVpc")
    if existing is None and network is None and "network" not in raw and "existingVpc" not in raw:
        network = NetworkConfig()
    sections = Sections(
        set_keys=set(raw),
        cluster_name=parsed.get("clusterName") or default_cluster_name(project, stack),
        network=network,
        existing_vpc=existing,
        cluster=parsed.get("cluster") or ClusterConfig(),
        system=parsed.get("systemNodeGroup") or SystemNodeGroupConfig(),
        groups=groups,
        group_names=list(raw_groups),
        catalog=catalog,
        images=images,
        datasets=datasets,
        jobs={name: with_group_defaults(job, list(raw_groups), groups) for name, job in jobs.items()},
        job_names=job_names,
        job_paths=job_paths,
        entry_names={section: list(parsed.get(section) or {}) for section in ENTRY_NAME_MAX},
        storage=parsed.get("storage") or StorageConfig(),
        failed=p.failed,
        failed_group_types=_failed_group_types(raw_groups, groups),
        image_folders=image_folders,
        project_dir=where,
        raw=raw,
        operations=parsed.get("operations") or OperationsConfig(),
        teams=teams.entries(parsed, "teams"),
        team_names=list(parsed.get("teams") or {}),
        team_entry_problems=teams.problems,
    )
    return sections, run


def _stack_config(
    project: str, stack: str, sections: Sections, parsed: dict[str, Any], aws: AwsSettings, run: str
) -> StackConfig:
    """The validated configuration the program and the tools read, from sections the rules passed."""
    jobs = dict(sections.jobs)
    bench: Optional[BenchmarkConfig] = parsed.get("benchmark")
    return StackConfig(
        project=project,
        stack=stack,
        cluster_name=sections.cluster_name,
        network=sections.network,
        existing_vpc=sections.existing_vpc,
        cluster=sections.cluster,
        system_node_group=sections.system,
        node_groups=sections.groups,
        storage=sections.storage,
        catalog=sections.catalog,
        tags={str(k): str(v) for k, v in (parsed.get("tags") or {}).items()},
        images=sections.images,
        image_build=parsed.get("imageBuild") or ImageBuildConfig(),
        datasets=sections.datasets,
        jobs=jobs,
        preflight=parsed.get("preflight") or PreflightConfig(),
        autoscaler=parsed.get("autoscaler") or AutoscalerConfig(),
        aws=aws,
        benchmark=None
        if bench is None
        else benchmark_settings(bench, run, {n: jobs[n] for n in sections.job_paths if n in jobs}),
        image_folders=sections.image_folders,
        operations=sections.operations,
        code_folders={n: sections.project_dir / j.code_folder for n, j in jobs.items() if j.code_folder is not None},
        teams=sections.teams,
    )


def _failed_group_types(raw_groups: Mapping[str, Any], groups: Mapping[str, NodeGroupConfig]) -> dict[str, list[str]]:
    """The instance types named by groups that failed their own validation (still checked against the catalog)."""
    return {
        name: [t for t in value["instanceTypes"] if isinstance(t, str)]
        for name, value in raw_groups.items()
        if name not in groups and isinstance(value, dict) and isinstance(value.get("instanceTypes"), list)
    }
