"""Base model and value checks shared by the config sections."""

import ipaddress
import re
from typing import Annotated, Any, Iterable, Optional

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel

from components.catalog.amis import ami_release_problem
from components.catalog.operations import OBSERVABILITY_NAMESPACE
from components.conventions import KUEUE_NAMESPACE, SHARED_MOUNT
from components.naming import DNS_SUBDOMAIN_RE

#: Lowercase RFC 1123 label (Kubernetes object names, group and job names).
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
#: Namespaces the stack's own training namespace (``storage.namespace``) and a team's may not be: Kubernetes' own
#: and those the stack installs its controllers in (Kueue, the MPI Operator, the CloudWatch Observability add-on's
#: agents). Kueue (0.18 and later) does not even queue jobs in kube-system or its own namespace: its job webhooks leave
#: them out (kubernetes-sigs/kueue#11192, CHANGELOG/CHANGELOG-0.18.md "Actions Required"). The stack creates its
#: namespaces: one that exists already fails ``pulumi up`` with AlreadyExists
#: (pulumi-kubernetes creates with a client-side create since 4.29.0,
#: https://github.com/pulumi/pulumi-kubernetes/releases/tag/v4.29.0; before, server-side apply adopted the object and
#: ``pulumi destroy`` deleted it), and the stack's pod security labels and default-deny network policies would land
#: on the controllers' pods.
RESERVED_NAMESPACES = (
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    KUEUE_NAMESPACE,
    "mpi-operator",  # the MPI Operator's release manifest's own (MANIFESTS["mpi-operator"])
    OBSERVABILITY_NAMESPACE,
)
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
#: What a label key and a label value are, as a message's fix (Kubernetes' syntax and character set,
#: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set).
LABEL_KEY_RULE = (
    "a name of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, optionally "
    "after a lowercase DNS prefix and '/' (e.g. example.com/team)"
)
LABEL_VALUE_RULE = "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, or empty"
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
VPC_RE = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_RE = re.compile(r"^subnet-[0-9a-f]{8,17}$")
#: A zone name (us-east-1a) or a zone ID (use1-az1): names map to different zones in each account, IDs do not.
ZONE_ID_RE = re.compile(r"^[a-z]{2,}\d-az\d+$")
AZ_RE = re.compile(r"^([a-z]{2}(-[a-z]+)+-\d[a-z]|[a-z]{2,}\d-az\d+)$")
AZ_HINT = "is not a zone name (us-east-1a) or zone ID (use1-az1)"
QUANTITY_RE = re.compile(r"^\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
#: Each suffix :data:`QUANTITY_RE` takes, as a multiple of one (Kubernetes' resource.Quantity).
QUANTITY_SUFFIXES = {
    "": 1,
    **{s: 1024 ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: 1000 ** (i + 1) for i, s in enumerate(("k", "M", "G", "T", "P", "E"))},
}


def quantity_value(text: str) -> float:
    """A quantity :data:`QUANTITY_RE` matches, as a number (``1Ti`` and ``1024Gi`` are the same)."""
    number = re.match(r"^\d+(\.\d+)?", text)
    assert number is not None, text
    return float(number.group(0)) * QUANTITY_SUFFIXES[text[number.end() :]]


RESERVATION_RE = re.compile(r"^cr-[0-9a-f]{8,17}$")
EFS_ID_RE = re.compile(r"^fs-[0-9a-f]{8,17}$")
MD5_RE = re.compile(r"^[0-9a-f]{32}$")
#: S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens, starting and ending with a
#: letter or digit (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
S3_BUCKET_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
S3_BUCKET_RE = re.compile(rf"^{S3_BUCKET_PATTERN}$")
#: ``s3://bucket/prefix/`` (one or more prefix segments, trailing slash): a results location.
S3_PATH_RE = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<prefix>(?:[^/]+/)+)$")
#: ``s3://bucket/`` or ``s3://bucket/prefix/``: an FSx data repository (AWS: "the prefix is optional",
#: CreateDataRepositoryAssociation's DataRepositoryPath).
S3_REPOSITORY_PATH_RE = re.compile(r"^s3://(?P<bucket>[^/]+)/(?P<prefix>(?:[^/]+/)*)$")
#: A prefix inside a bucket: ``datasets/`` or ``team/datasets/``.
S3_PREFIX_RE = re.compile(r"^(?:[A-Za-z0-9!_.*'()-]+/)+$")
#: A folder of objects to download: ``s3://bucket/`` or ``s3://bucket/prefix/``.
S3_FOLDER_URI_RE = re.compile(rf"^s3://{S3_BUCKET_PATTERN}/([^\s]*/)?$")


def split_s3_path(uri: Optional[str]) -> Optional[tuple[str, str]]:
    """``(bucket, prefix)`` of an ``s3://bucket/prefix/`` path (the prefix empty at the bucket's root), or ``None``."""
    m = S3_REPOSITORY_PATH_RE.match(uri or "")
    return (m.group("bucket"), m.group("prefix")) if m else None


#: Longest entry name of each map section. Names are DNS labels that become parts of AWS and Kubernetes names
#: (node groups, roles, Jobs, Services, ECR repositories); a derived name past its service's limit is shortened
#: with a stable hash (components/naming.py), these bounds keep the readable part meaningful.
ENTRY_NAME_MAX: dict[str, int] = {"nodeGroups": 20, "jobs": 40, "images": 40, "datasets": 40}
#: Job (and benchmark experiment) names are RFC 1035 labels, starting with a letter: a job's name names its headless
#: Service (``<job>-workers``) and, for an MPIJob, the Services and pods the MPI Operator creates, and the API server
#: refuses a Service name that starts with a digit
#: (https://kubernetes.io/docs/concepts/overview/working-with-objects/names/#rfc-1035-label-names). The other entries
#: only become RFC 1123 labels and AWS names, where a leading digit is fine.
JOB_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
ENTRY_NAME_RE: dict[str, re.Pattern[str]] = {
    "nodeGroups": NAME_RE,
    "jobs": JOB_NAME_RE,
    "images": NAME_RE,
    "datasets": NAME_RE,
}


def entry_name_problem(section: str, name: object, path: str) -> Optional[str]:
    """Why ``name`` cannot name an entry of map section ``section`` (the text after the key), or ``None``."""
    longest = ENTRY_NAME_MAX[section]
    if isinstance(name, str) and ENTRY_NAME_RE[section].match(name) and len(name) <= longest:
        return None
    shown = name if isinstance(name, str) else str(name)
    hint = f" (e.g. {shown[:longest].rstrip('-')!r})" if len(shown) > longest else ""
    if section == "jobs":
        if shown[:1].isdigit():
            hint = f" (e.g. {('job-' + shown)[:longest].rstrip('-')!r})"
        return (
            f"the name must be 1-{longest} lowercase letters, digits and '-', starting with a letter and ending "
            f"with a letter or digit (it names the job's Kubernetes Service and pods, which must start with a "
            f"letter); rename {path}{hint}"
        )
    return (
        f"the name must be 1-{longest} lowercase letters, digits and '-', starting and ending with a letter or "
        f"digit; rename {path}{hint}"
    )


def reference(
    *,
    allowed: Optional[Iterable[Any]] = None,
    between: Optional[tuple[float, float]] = None,
    unset: Optional[Any] = None,
) -> dict[str, Any]:
    """``Field(json_schema_extra=reference(...))``: what the configuration reference (``stacks/docs.py``) shows of a
    field that its type and ``Field`` constraints do not say: the values (``allowed``) or the range (``between``) its
    validator accepts, and the value that applies when it is unset (``unset``, for a field whose default is ``None``
    because the value is derived). Give each the constant the code reads, so the reference and the code share it."""
    extra: dict[str, Any] = {}
    if allowed is not None:
        extra["allowed"] = list(allowed)
    if between is not None:
        extra["between"] = list(between)
    if unset is not None:
        extra["unset"] = unset
    return extra


#: A decimal number as written in YAML, or as ``pulumi config set --path`` stores one: "true" and "false" become
#: booleans and integers numbers, "all other values are treated as strings"
#: (https://www.pulumi.com/docs/iac/cli/commands/pulumi_config_set/), so ``--path ...minBusBandwidthGBps 40.5``
#: arrives as the string "40.5". Such a string is read as its number; anything else is left to the strict check
#: (a word, a boolean: refused with the value to write).
_DECIMAL = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _decimal_from_cli(value: Any) -> Any:
    return float(value) if isinstance(value, str) and _DECIMAL.match(value.strip()) else value


Number = Annotated[float, BeforeValidator(_decimal_from_cli)]


def _ami_release(value: Optional[str]) -> Optional[str]:
    why = ami_release_problem(value)
    if why:
        raise ValueError(why)
    return value


#: An ``amiRelease`` key: an EKS AMI release tag or release version (whether it has AMIs for the cluster's minor is
#: a cross-section rule, :func:`stacks.config.amis.ami_release_problems`).
AmiRelease = Annotated[Optional[str], AfterValidator(_ami_release)]


def _object_not_null(value: Any) -> Any:
    if value is None:
        raise ValueError(
            "null (an empty value) is not an object; write {} to set it with its defaults, or remove the key"
        )
    return value


#: On an optional object key (``healthCheck``, ``nodeRepair``, ``fsx``): ``key:`` with nothing after it is refused,
#: not read as absent (a user who wrote it meant the object, perhaps ``{}``).
OBJECT_NOT_NULL = BeforeValidator(_object_not_null)


#: The largest integer a config key may hold: AWS's APIs take 32-bit integers (Smithy's ``integer``,
#: https://smithy.io/2.0/spec/simple-types.html), and so do the Kubernetes fields the stack's sizes become (a Job's
#: ``parallelism``, a port). A larger number is a typo that would otherwise fail ``pulumi up`` half way. Byte counts
#: (keys ending in ``Bytes``) are exempt: the program reads them itself, as 64-bit numbers.
INT32_MAX = 2**31 - 1


def oversized_integers(value: Any, field: str = "") -> Iterable[tuple[str, int]]:
    """``(key, number)`` for each integer above :data:`INT32_MAX` in a validated section, its keys relative to it
    (``nodeGroups.gpu.maxSize`` under ``nodeGroups``: ``gpu.maxSize``)."""
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            if not name.endswith("_bytes"):
                sub = info.alias or name
                yield from oversized_integers(getattr(value, name), f"{field}.{sub}" if field else sub)
    elif isinstance(value, int) and not isinstance(value, bool):
        if value > INT32_MAX:
            yield field, value
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from oversized_integers(item, f"{field}[{i}]")
    elif isinstance(value, dict):
        for k, item in value.items():
            yield from oversized_integers(item, f"{field}.{k}" if field else str(k))


class Model(BaseModel):
    """Base for config objects: camelCase keys, unknown keys rejected, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=False,
        frozen=True,
        use_attribute_docstrings=True,
        strict=True,
    )


def label_key_ok(k: str) -> bool:
    """A valid Kubernetes label (or taint) key: optional DNS-subdomain prefix, 63-character name."""
    prefix, _, name = k.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(LABEL_NAME_RE.match(name))


def label_value_ok(v: str) -> bool:
    """A valid Kubernetes label value."""
    return len(v) <= 63 and bool(LABEL_VALUE_RE.match(v))


def cidr_problem(value: str) -> Optional[str]:
    """Why ``value`` is not an IPv4 network address in CIDR notation, or ``None``."""
    if "/" not in value:  # ipaddress reads a bare address as a /32; AWS's CIDR fields ask for the prefix
        return f"{value!r} has no prefix length; write {value}/32 for one address, or a network such as 10.0.0.0/16"
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        return f"{value!r} is not a valid CIDR ({exc}); use a network address such as 10.0.0.0/16"
    if not isinstance(net, ipaddress.IPv4Network):
        return f"{value!r} is IPv6; this project builds IPv4 clusters, use an IPv4 CIDR"
    return None


def ipv4(value: str) -> Optional[ipaddress.IPv4Network]:
    """``value`` as an IPv4 network, or ``None`` when it is not one."""
    if cidr_problem(value) is not None:
        return None
    return ipaddress.IPv4Network(value)


def version_tuple(version: str) -> tuple[int, ...]:
    """``"v1.18.5-eksbuild.1"`` -> ``(1, 18, 5)`` (``(0,)`` when it does not start with a version)."""
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(x) for x in m.groups()) if m else (0,)


def version_text(version: tuple[int, ...]) -> str:
    """``(1, 18, 5)`` -> ``v1.18.5`` (how EKS spells add-on versions)."""
    return "v" + ".".join(str(x) for x in version)


_PATH_RE = re.compile(r"^[\w./-]+$")


def relative_path_problem(v: str) -> Optional[str]:
    """Why ``v`` is not a relative path inside the shared volume (or the repository), or ``None``."""
    if ".." in v.split("/") or v.startswith("/") or not _PATH_RE.match(v):
        return f"{v!r} must be a relative path inside the shared volume"
    return None


def volume_path_problem(v: str) -> Optional[str]:
    """:func:`relative_path_problem` of a folder of the shared volume (an ``outputDir``, a dataset's ``path``): one
    written as the pods see it, ``/data/...``, names the value to write instead."""
    why = relative_path_problem(v)
    inside = v.removeprefix(f"{SHARED_MOUNT}/")
    if why is not None and inside != v and relative_path_problem(inside) is None:
        return f"{why}: drop the leading {SHARED_MOUNT}/, {inside!r}"
    return why
