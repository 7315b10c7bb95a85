"""What the EFS and FSx components share: the CSI driver as an EKS managed add-on with its own Pod Identity role,
the training namespace and the ReadWriteMany claim workloads mount."""

from typing import Any, Iterable, Mapping, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons import addon_version
from components.pod_identity import PodIdentityRole, pod_identity_role


def csi_addon(
    parent: pulumi.Resource,
    name: str,
    args: Mapping[str, Any],
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
    add-on ``{name}-csi-addon`` that associates it, from the component's ``args`` (``cluster_name``, ``addon_after``:
    its controller's nodes, ``kubernetes_version``, ``addon_version``)."""
    cluster_name = pulumi.Output.from_input(args["cluster_name"])
    addon_after = args.get("addon_after")
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
    version = addon_version(parent, addon_name, args["kubernetes_version"], args.get("addon_version"), settings)
    pod_identity: aws.eks.AddonPodIdentityAssociationArgsDict = {
        "role_arn": identity.role.arn,
        "service_account": service_account,
    }
    # the role is made at once; the add-on once its controller's nodes are there (addon_after)
    addon_cluster = (
        cluster_name if addon_after is None else pulumi.Output.all(cluster_name, addon_after).apply(lambda v: str(v[0]))
    )
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
    """The ReadWriteMany claim ``{name}-pvc`` of ``size`` (bound to ``volume_name`` when given)."""
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
        opts=pulumi.ResourceOptions(parent=parent, provider=kubernetes, depends_on=list(depends_on) or None),
    )
