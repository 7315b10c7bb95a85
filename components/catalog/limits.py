"""Name limits the services enforce: the physical names the program derives must fit them for every config the
loader accepts (``tests/mock/test_names.py`` checks every registered resource of every stack and of long-name variants).

A Pulumi resource whose name input is left unset is auto-named: its logical name plus ``-`` and seven random
characters (source key ``pulumi-autonaming``), so the logical name must leave room for that suffix.
"""

from dataclasses import dataclass
from typing import Mapping, Optional

#: What Pulumi appends to an auto-named resource's logical name (``-`` and 7 random characters).
AUTONAME_SUFFIX_LENGTH = 8


@dataclass(frozen=True, kw_only=True)
class NameLimit:
    """The longest value (and the characters) a service accepts for one name input of one resource type."""

    max_length: int
    pattern: Optional[str] = None
    """A regular expression the whole value must match."""
    autonamed: bool = False
    """Pulumi fills the input from the logical name when it is unset."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


#: (Pulumi type token, input property) -> limit.
NAME_LIMITS: Mapping[tuple[str, str], NameLimit] = {
    ("eks:index:Cluster", "name"): NameLimit(
        max_length=100, pattern=r"[0-9A-Za-z][A-Za-z0-9\-_]*", source="eks-create-cluster"
    ),
    ("aws:eks/nodeGroup:NodeGroup", "nodeGroupName"): NameLimit(max_length=63, source="tf-eks-node-group"),
    ("aws:eks/nodeGroup:NodeGroup", "nodeGroupNamePrefix"): NameLimit(max_length=37, source="tf-eks-node-group"),
    ("aws:iam/role:Role", "name"): NameLimit(
        max_length=64, pattern=r"[\w+=,.@-]+", autonamed=True, source="iam-quotas"
    ),
    ("aws:iam/role:Role", "namePrefix"): NameLimit(max_length=38, source="iam-quotas"),
    ("aws:iam/rolePolicy:RolePolicy", "name"): NameLimit(
        max_length=128, pattern=r"[\w+=,.@-]+", autonamed=True, source="iam-quotas"
    ),
    ("aws:iam/policy:Policy", "name"): NameLimit(
        max_length=128, pattern=r"[\w+=,.@-]+", autonamed=True, source="iam-quotas"
    ),
    ("aws:ec2/launchTemplate:LaunchTemplate", "name"): NameLimit(
        max_length=128, pattern=r"[a-zA-Z0-9().\-/_]+", autonamed=True, source="ec2-create-launch-template"
    ),
    ("aws:ec2/securityGroup:SecurityGroup", "name"): NameLimit(
        max_length=255, autonamed=True, source="ec2-create-security-group"
    ),
    ("aws:ec2/placementGroup:PlacementGroup", "name"): NameLimit(
        max_length=255, autonamed=True, source="ec2-create-placement-group"
    ),
    ("aws:ecr/repository:Repository", "name"): NameLimit(
        max_length=256,
        pattern=r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*",
        autonamed=True,
        source="ecr-create-repository",
    ),
    ("aws:codebuild/project:Project", "name"): NameLimit(
        max_length=255, pattern=r"[A-Za-z0-9][A-Za-z0-9\-_]{1,254}", autonamed=True, source="codebuild-create-project"
    ),
    ("aws:s3/bucket:Bucket", "bucket"): NameLimit(
        max_length=63, pattern=r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", autonamed=True, source="s3-bucket-naming"
    ),
    ("aws:s3/bucket:Bucket", "bucketPrefix"): NameLimit(max_length=37, source="s3-bucket-naming"),
    ("aws:s3/bucketV2:BucketV2", "bucket"): NameLimit(
        max_length=63, pattern=r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", autonamed=True, source="s3-bucket-naming"
    ),
    ("aws:cloudwatch/logGroup:LogGroup", "name"): NameLimit(
        max_length=512, pattern=r"[.\-_/#A-Za-z0-9]+", autonamed=True, source="logs-create-log-group"
    ),
    ("aws:kms/alias:Alias", "name"): NameLimit(
        max_length=256, pattern=r"alias/[a-zA-Z0-9/_-]+", source="kms-create-alias"
    ),
    ("aws:efs/fileSystem:FileSystem", "creationToken"): NameLimit(max_length=64, source="efs-create-file-system"),
    ("kubernetes:helm.sh/v3:Release", "name"): NameLimit(
        max_length=53, pattern=r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", source="helm-release-name"
    ),
}

#: Kubernetes names (source key ``k8s-names``): most objects take a DNS subdomain (253), some a DNS label (63).
K8S_SUBDOMAIN_MAX = 253
K8S_LABEL_MAX = 63
K8S_SUBDOMAIN_RE = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
K8S_LABEL_RE = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#: Services take an RFC 1035 label (starts with a letter).
K8S_RFC1035_RE = r"[a-z]([-a-z0-9]*[a-z0-9])?"
#: Kinds whose names are DNS labels: Services and Namespaces (source key ``k8s-names``), StatefulSets (their pods'
#: hostnames, source key ``k8s-statefulset``) and Jobs (the controller copies the name into a label, source key
#: ``k8s-job-name``).
K8S_LABEL_NAMED_KINDS: frozenset[str] = frozenset({"Service", "Namespace", "StatefulSet", "Job"})
#: Label values and the name part of label keys (source key ``k8s-labels``).
K8S_LABEL_VALUE_MAX = 63
K8S_LABEL_VALUE_RE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
#: Container port names are IANA service names: at most 15 characters (source key ``k8s-container-port``).
K8S_PORT_NAME_MAX = 15
