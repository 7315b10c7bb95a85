"""Read every ``eks-training:*`` key and validate the configuration as a whole.

:func:`load_config` runs before the program registers any resource. Each section is validated by
its model (:mod:`stacks.config.network`, ``cluster``, ``nodegroups``, ``storage``, ``workloads``,
``instance_facts``), then the rules across sections run (:mod:`stacks.config.rules`). All problems
are collected and raised as one :class:`~stacks.config.errors.ConfigError` naming each bad key. The AWS
provider's settings the image builds need (``aws:profile``, ``aws:assumeRoles``, ...) are read and checked
here too (:func:`components.image.aws_settings.aws_settings_from_config`).
"""

import difflib
import functools
import importlib.util
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import botocore.loaders
import botocore.regions
import pulumi
from pydantic import BaseModel, ValidationError

from components.catalog import INSTANCE_TYPES, Catalog, InstanceType
from components.image.aws_settings import ASSUME_ROLE_V6, AwsSettings, AwsSettingsError, aws_settings_from_config
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
from stacks.config.errors import NAMESPACE, ConfigError, format_validation, key
from stacks.config.instance_facts import InstanceFactsConfig
from stacks.config.jobs import (
    TOOLBOX_IMAGE,
    DatasetConfig,
    ImageBuildConfig,
    ImageConfig,
    JobConfig,
    with_group_defaults,
)
from stacks.config.network import ExistingVpcConfig, NetworkConfig
from stacks.config.nodegroups import NodeGroupConfig, SystemNodeGroupConfig
from stacks.config.operations import OperationsConfig
from stacks.config.rules import CLUSTER_NAME_MAX, Sections
from stacks.config.rules import check as check_rules
from stacks.config.rules.network import zone_refs, zone_region_problems
from stacks.config.settings import AutoscalerConfig, PreflightConfig
from stacks.config.storage import StorageConfig
from stacks.config.teams import TeamConfig

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


def as_passed(value: Any) -> str:
    """A setting's value as Pulumi passes it to a program: a string as it is, a key with nothing after it (null) as
    ``""`` (Pulumi warns that the value is empty, sdk/go/common/workspace/loaders.go), anything else (objects, lists,
    numbers, booleans) as JSON."""
    return "" if value is None else value if isinstance(value, str) else json.dumps(value)


def setting(config: Mapping[str, Any], full_key: str) -> Optional[str]:
    """One setting of ``config`` (keyed ``<namespace>:<key>``) as Pulumi passes it (:func:`as_passed`; ``None`` when
    absent)."""
    value = config.get(full_key)
    return None if value is None else as_passed(value)


def raw_config(config: Mapping[str, Any]) -> dict[str, str]:
    """All ``eks-training:*`` settings of ``config`` as Pulumi passes them (:func:`as_passed`), keyed without the
    namespace."""
    out: dict[str, str] = {}
    for full, value in config.items():
        ns, sep, k = full.partition(":")
        if sep and ns == NAMESPACE:
            out[k] = as_passed(value)
    return out


#: The Pulumi engine's own namespace (``pulumi:tags``, ``pulumi:disable-default-providers``...).
ENGINE_NAMESPACE = "pulumi"
_PROVIDER_DIST = re.compile(r"^pulumi[-_](?P<name>[a-z0-9][a-z0-9-]*)$")


@functools.cache  # the installed distributions: reading every one's metadata costs 0.1 s, once per process
def provider_namespaces() -> tuple[str, ...]:
    """The config namespaces of the Pulumi providers installed beside the program (``pulumi-aws`` reads ``aws:``,
    ``pulumi-kubernetes`` ``kubernetes:``, ``pulumi-eks`` ``eks:``): a provider's package is named after its
    namespace (https://www.pulumi.com/docs/iac/concepts/config/#provider-configuration-options)."""
    found = set()
    for dist in metadata.distributions():
        m = _PROVIDER_DIST.match((dist.metadata["Name"] or "").lower().replace("_", "-"))
        if m:
            found.add(m.group("name"))
    return tuple(sorted(found))


#: The providers whose default instance this program uses, so whose ``<namespace>:`` settings are read: every AWS
#: resource goes through the default AWS provider. Every Kubernetes object goes through the explicit provider built
#: from the cluster's kubeconfig (stacks/environment.py, stacks/jobs_only.py), and an explicit provider is configured
#: by its arguments, not by the stack's ``kubernetes:`` settings
#: (https://www.pulumi.com/docs/iac/concepts/resources/providers/#explicit-providers); pulumi-eks has no provider
#: settings at all (its SDK has no ``config`` module).
READ_PROVIDERS = ("aws",)

#: Where each read provider's settings are listed (the registry's page of the provider's configuration).
_PROVIDER_DOCS = {"aws": "https://www.pulumi.com/registry/packages/aws/installation-configuration/"}

_SETTING_READ = re.compile(r"__config__\.get\w*\('(\w+)'\)")


@functools.cache
def provider_settings(namespace: str) -> frozenset[str]:
    """The settings the installed provider of ``namespace`` reads: the keys its Python SDK's ``config/vars.py``
    (generated from the provider's schema) gets, read from the file without importing the SDK."""
    if namespace != "aws":  # READ_PROVIDERS
        return frozenset()
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or spec.origin is None:
        return frozenset()
    source = Path(spec.origin).parent / "config" / "vars.py"
    return frozenset(_SETTING_READ.findall(source.read_text())) if source.is_file() else frozenset()


def _provider_problem(full: str, ns: str, name: str) -> Optional[str]:
    """The problem with ``<ns>:<name>`` for a provider's namespace: a provider whose default instance the program
    does not use reads none of its settings; the AWS provider reads only its own (a typo ``aws:regin`` is ignored by
    it, so the stack would run in another region or account)."""
    if ns not in READ_PROVIDERS:
        why = (
            "every Kubernetes object of this program goes through its own provider, made from the cluster's "
            "kubeconfig, which reads no kubernetes: setting"
            if ns == "kubernetes"
            else f"pulumi-{ns} has no settings, so nothing reads {ns}: settings"
            if ns == "eks"
            else f"this program uses no default {ns} provider, so nothing reads {ns}: settings"
        )
        return f"{full}: {why}; remove it"
    settings = provider_settings(ns)
    top = name.split(".")[0]
    if not settings or top in settings or (ns, top) == ("aws", ASSUME_ROLE_V6):
        return None  # aws:assumeRole: the AWS settings' own message names what pulumi-aws 7 reads instead
    near = difflib.get_close_matches(top, sorted(settings), n=1, cutoff=0.6) or [
        s for s in settings if s.lower() == top.lower()
    ]
    hint = f"did you mean {ns}:{near[0]}? " if near else ""
    return (
        f"{full}: pulumi-{ns} has no setting {top}, so it would be ignored; {hint}fix its spelling or remove it "
        f"(its settings: {_PROVIDER_DOCS.get(ns, f'https://www.pulumi.com/registry/packages/{ns}/')})"
    )


#: The packages whose default provider this program uses, with what it makes with each: every AWS resource (the
#: providers' settings, above), pulumi-eks's cluster, which the engine constructs through the eks package's default
#: provider (with it disabled: "Default provider for 'eks' disabled", https://github.com/pulumi/pulumi-eks/issues/917),
#: and the image builds, Python dynamic resources (:mod:`components.image.build_provider`).
DEFAULT_PROVIDERS = {
    "aws": "its AWS resources with the default aws provider (set by the stack's aws: settings)",
    "eks": "pulumi-eks's cluster with the default eks provider",
    "pulumi-python": "its image builds with the default pulumi-python provider",
}
#: The engine's setting that refuses default providers, by package or ``*``
#: (https://www.pulumi.com/docs/iac/concepts/resources/providers/#disabling-default-providers).
DISABLE_DEFAULT_PROVIDERS = f"{ENGINE_NAMESPACE}:disable-default-providers"
#: Engine settings a near miss is taken for (the engine ignores a key it does not know): default providers (above) and
#: auto-naming (https://www.pulumi.com/docs/iac/concepts/resources/names/#configuring-auto-naming).
ENGINE_SETTINGS = ("disable-default-providers", "autonaming")


def _engine_problem(full: str) -> Optional[str]:
    """A near miss of an engine setting, which the engine would ignore."""
    name = full.partition(":")[2]
    near = difflib.get_close_matches(name, ENGINE_SETTINGS, n=1, cutoff=0.85)
    if near and near[0] != name:
        return (
            f"{full}: the Pulumi engine has no setting {name}, so it would be ignored; did you mean "
            f"{ENGINE_NAMESPACE}:{near[0]}? fix its spelling"
        )
    return None


def disabled_providers_problem(config: Mapping[str, Any], *, makes_cluster: bool, builds_images: bool) -> Optional[str]:
    """The problem with :data:`DISABLE_DEFAULT_PROVIDERS` refusing a default provider this program uses: aws always,
    eks when it ``makes_cluster``, pulumi-python when it ``builds_images``."""
    value = config.get(DISABLE_DEFAULT_PROVIDERS)
    if value is None:
        return None
    try:
        listed = json.loads(as_passed(value) or "[]")
    except ValueError:
        return None  # the engine's own message
    if not isinstance(listed, list):
        return None
    disabled = {str(p).strip() for p in listed}  # the engine trims each entry
    used = [p for p, wanted in (("aws", True), ("eks", makes_cluster), ("pulumi-python", builds_images)) if wanted]
    refused = [p for p in used if p in disabled or "*" in disabled]
    if not refused:
        return None
    makes = [DEFAULT_PROVIDERS[p] for p in used]
    return (
        f"{DISABLE_DEFAULT_PROVIDERS}: this program makes {', '.join(makes[:-1])}{' and ' if len(makes) > 1 else ''}"
        f"{makes[-1]}, so `pulumi up` would refuse them ({', '.join(refused)} disabled); remove "
        f"{' and '.join(p for p in (*refused, '*') if p in disabled)} from it"
    )


def unread_keys(config: Mapping[str, Any], project: str) -> list[str]:
    """Problems for the keys of ``config`` (every namespace) that nothing reads: a key without a namespace, a
    namespace that is neither this program's (``eks-training``), the engine's nor an installed provider's, such as
    a typo (``eks-trainig:jobs``) or the project's own namespace when the project has another name (``pulumi config
    set jobs ...`` in project ``research`` writes ``research:jobs``). Each names the key this program reads."""
    providers = provider_namespaces()
    known = {NAMESPACE, ENGINE_NAMESPACE, *providers}
    read = [n for n in READ_PROVIDERS if n in providers]
    reads = f"this program reads {NAMESPACE}:<key> (and {', '.join(f'{n}:' for n in read)} its provider reads)"
    problems = []
    for full in sorted(config):
        ns, sep, name = full.partition(":")
        if not sep:
            problems.append(
                f"{full}: a key without a namespace; Pulumi reads a stack file's keys as <namespace>:<key> (`pulumi "
                f"up` refuses this file) and {reads}; rename it {key(full)}"
            )
        elif ns in providers:
            problem = _provider_problem(full, ns, name)
            if problem is not None:
                problems.append(problem)
        elif ns == ENGINE_NAMESPACE:
            engine = _engine_problem(full)
            if engine is not None:
                problems.append(engine)
        elif ns in known:
            continue
        elif ns == project:
            problems.append(
                f"{full}: nothing reads the project's namespace {project}: (`pulumi config set {name}` writes there in "
                f"project {project}); {reads}: rename it {key(name)} (pulumi config set --path '{key(name)}' ...)"
            )
        else:
            # a key this program has (jobs, nodeGroups.gpu...) is meant for its namespace, whatever the typo is close to
            ours = name.split(".")[0] in SECTIONS
            near = [NAMESPACE] if ours else difflib.get_close_matches(ns, sorted(known), n=1, cutoff=0.7)
            hint = f"did you mean {near[0]}:{name}? " if near else ""
            target = f"{near[0]}:{name}" if near else key(name)
            problems.append(
                f"{full}: nothing reads the {ns}: namespace, so this key would be ignored; {hint}{reads}; "
                f"rename it {target}, or remove it"
            )
    return problems


@functools.cache
def eks_regions() -> frozenset[str]:
    """The regions EKS is offered in, in every AWS partition, from botocore's endpoint data (the AWS SDK's list,
    pinned in requirements.txt), read without the shell's AWS settings (an ``AWS_PROFILE`` no file holds is no
    reason to refuse a region)."""
    resolver = botocore.regions.EndpointResolver(botocore.loaders.create_loader().load_data("endpoints"))
    return frozenset(
        r for part in resolver.get_available_partitions() for r in resolver.get_available_endpoints("eks", part)
    )


def region_problems(config: Mapping[str, Any], zones: Sequence[tuple[str, str]] = ()) -> list[str]:
    """``aws:region`` that is no region EKS is offered in (a typo such as ``us-east-9`` or ``us-east1``), unless the
    stack sets ``aws:skipRegionValidation: true`` for a region newer than the SDK's list; a zone of ``zones`` (config
    path, zone) named in another region."""
    region = setting(config, "aws:region")
    if not region:
        return ["aws:region: not set; run `pulumi config set aws:region us-east-1` (or your region)"]
    if region in eks_regions() or setting(config, "aws:skipRegionValidation") in ("true", "True"):
        return zone_region_problems(list(zones), region)
    near = difflib.get_close_matches(region, sorted(eks_regions()), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}? " if near else ""
    return [
        f"aws:region: {region!r} is not a region EKS is offered in (the AWS SDK's list: "
        f"https://docs.aws.amazon.com/general/latest/gr/eks.html); {hint}set a region such as us-east-1 "
        "(for a region newer than botocore's list, also set aws:skipRegionValidation: true)"
    ]


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
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            self.problems.extend(format_validation(path, exc, model))
            self.failed.add(path)
            return None

    def sections(self, raw: Mapping[str, str]) -> dict[str, Any]:
        """Each top-level key parsed: a string, a map of entries (parsed by :meth:`entries`) or a section's model."""
        parsed: dict[str, Any] = {}
        for k, value in raw.items():
            kind = SECTIONS.get(k)
            if kind is None:
                near = difflib.get_close_matches(k, list(SECTIONS), n=1, cutoff=0.75) or [
                    s for s in SECTIONS if s.lower() == k.lower()
                ]
                hint = f"did you mean {near[0]}? rename it; " if near else ""
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
            try:
                obj = json.loads(value)
            except json.JSONDecodeError:
                obj = value
            if not isinstance(obj, dict):
                what = {type(None): EMPTY_OBJECT, list: f"a list {obj!r}"}.get(
                    type(obj), (repr(obj) if obj else EMPTY_OBJECT) if isinstance(obj, str) else type(obj).__name__
                )
                self.problems.append(f"{key(k)}: must be an object (a YAML mapping), got {what}")
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
    p.problems.extend(unread_keys(config, project))
    parsed = p.sections(raw)
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
    tags = parsed.get("tags") or {}
    for tk, tv in tags.items():
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
    p.problems.extend(check_rules(sections))
    aws = p.aws(config)
    p.problems.extend(region_problems(config, zone_refs(sections)))
    if p.problems:
        raise ConfigError(p.problems)
    jobs = dict(sections.jobs)
    return StackConfig(
        project=project,
        stack=stack,
        cluster_name=sections.cluster_name,
        network=network,
        existing_vpc=existing,
        cluster=sections.cluster,
        system_node_group=sections.system,
        node_groups=groups,
        storage=sections.storage,
        catalog=catalog,
        tags={str(k): str(v) for k, v in tags.items()},
        images=images,
        image_build=parsed.get("imageBuild") or ImageBuildConfig(),
        datasets=datasets,
        jobs=jobs,
        preflight=parsed.get("preflight") or PreflightConfig(),
        autoscaler=parsed.get("autoscaler") or AutoscalerConfig(),
        aws=aws,
        benchmark=None
        if bench is None
        else benchmark_settings(bench, run, {n: jobs[n] for n in job_paths if n in jobs}),
        image_folders=image_folders,
        operations=sections.operations,
        code_folders={n: where / j.code_folder for n, j in jobs.items() if j.code_folder is not None},
        teams=sections.teams,
    )


def _failed_group_types(raw_groups: Mapping[str, Any], groups: Mapping[str, NodeGroupConfig]) -> dict[str, list[str]]:
    """The instance types named by groups that failed their own validation (still checked against the catalog)."""
    return {
        name: [t for t in value["instanceTypes"] if isinstance(t, str)]
        for name, value in raw_groups.items()
        if name not in groups and isinstance(value, dict) and isinstance(value.get("instanceTypes"), list)
    }
