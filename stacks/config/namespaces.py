"""The stack file's keys outside ``eks-training``: how Pulumi passes a setting to the program, which namespaces
and settings something reads (the engine's, the AWS provider's), and the problems of the keys nothing reads or that
would break the program: a typo of a namespace or a provider's setting, default providers it needs disabled, a
region EKS is not offered in."""

import difflib
import functools
import importlib.util
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Collection, Mapping, Optional, Sequence

import botocore.loaders
import botocore.regions

from components.image.aws_settings import ASSUME_ROLE_V6
from stacks.config.errors import NAMESPACE, key
from stacks.config.rules.network import zone_region_problems


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


#: The AWS provider's region: every resource of a stack is made there.
REGION_KEY = "aws:region"
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


def unread_keys(config: Mapping[str, Any], project: str, sections: Collection[str]) -> list[str]:
    """Problems for the keys of ``config`` (every namespace) that nothing reads: a key without a namespace, a
    namespace that is neither this program's (``eks-training``), the engine's nor an installed provider's, such as
    a typo (``eks-trainig:jobs``) or the project's own namespace when the project has another name (``pulumi config
    set jobs ...`` in project ``research`` writes ``research:jobs``). Each names the key this program reads;
    ``sections``: the top-level keys of its namespace (a key of another namespace that is one of them is meant for
    it)."""
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
            ours = name.split(".")[0] in sections
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
    region = setting(config, REGION_KEY)
    if not region:
        return [f"{REGION_KEY}: not set; run `pulumi config set {REGION_KEY} us-east-1` (or your region)"]
    if region in eks_regions() or setting(config, "aws:skipRegionValidation") in ("true", "True"):
        return zone_region_problems(list(zones), region)
    near = difflib.get_close_matches(region, sorted(eks_regions()), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}? " if near else ""
    return [
        f"{REGION_KEY}: {region!r} is not a region EKS is offered in (the AWS SDK's list: "
        f"https://docs.aws.amazon.com/general/latest/gr/eks.html); {hint}set a region such as us-east-1 "
        "(for a region newer than botocore's list, also set aws:skipRegionValidation: true)"
    ]
