"""What the EFS and FSx components share: the CSI driver as an EKS managed add-on with its own Pod Identity role,
the training namespace and the ReadWriteMany claim workloads mount."""

from typing import Iterable, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.addons import addon_version
from components.ordering import ordered_after
from components.pod_identity import PodIdentityRole, pod_identity_role


class CsiDriverArgs(TypedDict):
    """Where a storage component installs its CSI driver, an EKS managed add-on, and when."""

    cluster_name: pulumi.Input[str]
    """EKS cluster name (add-on, Pod Identity trust)."""
    kubernetes_version: str
    """Kubernetes version (selects the add-on's default version)."""
    addon_after: NotRequired[pulumi.Input[str]]
    """An output of what the add-on is created after: the nodes its controller runs on (without them the add-on is
    never ACTIVE) and the Pod Identity agent that hands it its role (:func:`nodes_and_agent`). The add-on waits for
    the resources behind it, not for its value. Default: the add-on is created once ``cluster_name`` resolves."""
    addon_version: NotRequired[str]
    """The add-on's version (``aws-efs-csi-driver`` or ``aws-fsx-csi-driver``); default this project's pin for the
    Kubernetes version, else EKS's default."""


def nodes_and_agent(
    system_node_group_name: pulumi.Input[str], pod_identity_agent_arn: pulumi.Input[str]
) -> pulumi.Output[str]:
    """An ``addon_after`` (:class:`CsiDriverArgs`): the system node group's name, carrying the group and the Pod
    Identity agent add-on (:func:`~components.ordering.ordered_after`). The CSI add-on is then created after the nodes
    its controller runs on and the agent that gives it its role, and on destroy it goes before those nodes."""
    return ordered_after(pulumi.Output.from_input(system_node_group_name), pod_identity_agent_arn)


def csi_addon(
    parent: pulumi.Resource,
    name: str,
    driver: CsiDriverArgs,
    *,
    addon_name: str,
    label: str,
    service_account: str,
    settings: Iterable[str],
    tags: dict[str, str],
    policy: Optional[pulumi.Input[str]] = None,
    managed_policy_arns: Sequence[pulumi.Input[str]] = (),
) -> tuple[PodIdentityRole, aws.eks.Addon]:
    """The CSI controller's own role (``{name}-csi-*``), trusted only for its service account in kube-system, and the
    add-on ``{name}-csi-addon`` that associates it, where and when ``driver`` says."""
    cluster_name = pulumi.Output.from_input(driver["cluster_name"])
    addon_after = driver.get("addon_after")
    identity = pod_identity_role(
        parent,
        f"{name}-csi",
        cluster_name=cluster_name,
        namespace="kube-system",
        service_account=service_account,
        description=f"{label} CSI controller (EKS Pod Identity, kube-system/{service_account})",
        role_name=f"{name}-csi",
        policy=policy,
        managed_policy_arns=managed_policy_arns,
        associate=False,  # the add-on associates the role with its service account itself
        tags=tags,
    )
    version = addon_version(parent, addon_name, driver["kubernetes_version"], driver.get("addon_version"), settings)
    pod_identity: aws.eks.AddonPodIdentityAssociationArgsDict = {
        "role_arn": identity.role.arn,
        "service_account": service_account,
    }
    # the role is made at once; the add-on once its controller's nodes are there (addon_after)
    addon_cluster = cluster_name if addon_after is None else ordered_after(cluster_name, addon_after)
    addon = aws.eks.Addon(
        f"{name}-csi-addon",
        cluster_name=addon_cluster,
        addon_name=addon_name,
        addon_version=version,
        pod_identity_associations=[pod_identity],
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="PRESERVE",
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=identity.policies),
    )
    return identity, addon


def training_namespace(
    parent: pulumi.Resource, name: str, namespace: str, kubernetes: Optional[pulumi.ProviderResource]
) -> k8s.core.v1.Namespace:
    """The training namespace ``{name}-namespace``, enforcing the baseline pod security standard."""
    return k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={
            "name": namespace,
            "labels": {"app.kubernetes.io/managed-by": "pulumi", "pod-security.kubernetes.io/enforce": "baseline"},
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=kubernetes),
    )


def shared_claim(
    parent: pulumi.Resource,
    name: str,
    *,
    pvc_name: str,
    namespace: pulumi.Input[str],
    size: str,
    storage_class_name: pulumi.Input[str],
    kubernetes: Optional[pulumi.ProviderResource],
    volume_name: Optional[pulumi.Input[str]] = None,
    depends_on: Sequence[pulumi.Resource] = (),
) -> k8s.core.v1.PersistentVolumeClaim:
    """The ReadWriteMany claim ``{name}-pvc`` of ``size`` (bound to ``volume_name`` when given). A claim bound to a
    given volume keeps the size it was made with: Kubernetes resizes only claims a StorageClass provisioned (the
    PersistentVolumeClaimResize admission plugin), so the volume says how large the file system grew."""
    spec: k8s.core.v1.PersistentVolumeClaimSpecArgsDict = {
        "access_modes": ["ReadWriteMany"],
        "storage_class_name": storage_class_name,
        "resources": {"requests": {"storage": size}},
    }
    if volume_name is not None:
        spec["volume_name"] = volume_name
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-pvc",
        metadata={"name": pvc_name, "namespace": namespace},
        spec=spec,
        opts=pulumi.ResourceOptions(
            parent=parent,
            provider=kubernetes,
            depends_on=list(depends_on) or None,
            ignore_changes=["spec.resources"] if volume_name is not None else None,
        ),
    )
