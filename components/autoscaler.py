"""``ClusterAutoscaler``: the Kubernetes cluster-autoscaler for the EKS managed node groups.

It scales the groups from 0 to their maximum and keeps their launch templates (EFA interfaces, placement group,
zone, reservations), which Karpenter would replace. Scale-from-zero reads each group's node-template tags
(``TrainingNodeGroup(autoscaler_tags=True)``). It runs on the system nodes with its own Pod Identity role, and scales
only the Auto Scaling groups this cluster owns. With ``provisioning_requests`` it answers Kueue's
ProvisioningRequests: a flag (source key ``ca-provisioning-request-flags``), a ClusterRole of its own
(:data:`PROVISIONING_REQUEST_RULES`), and the CRD applied first (:func:`provisioning_request_crd`).

Why: docs/how-to/capacity.md, "Scale to zero"; docs/explanation/admission.md, "Topology-aware placement on the EC2
network" (the chart versions and rules)."""

from typing import Any, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import CLUSTER_AUTOSCALER, MANIFESTS, chart_image_values
from components.helm import pinned_release
from components.iam import autoscaler_policy
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.pod_identity import pod_identity_role
from components.scheduling import system_node_selector

SERVICE_ACCOUNT = "cluster-autoscaler"
NAMESPACE = "kube-system"
#: The ClusterRole (and its binding to the autoscaler's service account) of :data:`PROVISIONING_REQUEST_RULES`.
PROVISIONING_REQUEST_ROLE = "cluster-autoscaler-provisioning-requests"


#: What the autoscaler does with ProvisioningRequests at the pinned releases (1.32.7-1.36.1; 1.32.7 only with
#: ``--kube-api-content-type=application/json``, :func:`cluster_autoscaler_values`): lists and watches them
#: and the PodTemplates they name (informers, builder/clients.go), writes their conditions (``UpdateStatus`` and
#: server-side ``ApplyStatus`` on ``provisioningrequests/status``, provisioningrequest/provreqclient/client.go) and
#: deletes those finished for 7 days (processors/provreq/processor.go ``DeleteOldProvReqs``).
PROVISIONING_REQUEST_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["autoscaling.x-k8s.io"],
        "resources": ["provisioningrequests"],
        "verbs": ["get", "list", "watch", "delete"],
    },
    {
        "apiGroups": ["autoscaling.x-k8s.io"],
        "resources": ["provisioningrequests/status"],
        "verbs": ["get", "update", "patch"],
    },
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["get", "list", "watch"]},
]


def cluster_autoscaler_values(
    cluster_name: pulumi.Input[str],
    region: str,
    kubernetes_version: str,
    provisioning_request_crd: Optional[pulumi.Input[str]] = None,
) -> dict[str, Any]:
    """Helm values for the pinned chart. With ``provisioning_request_crd``
    (see :class:`ClusterAutoscalerArgs`) the autoscaler handles ProvisioningRequests: the flag's value waits for the
    CRD."""
    release = CLUSTER_AUTOSCALER.get(kubernetes_version)
    if release is None:
        raise ValueError(
            f"no cluster-autoscaler for Kubernetes {kubernetes_version}; one of {', '.join(CLUSTER_AUTOSCALER)}"
        )
    values: dict[str, Any] = {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        # The chart writes repository:tag; the tag carries the digest (v1.36.1@sha256:...).
        "image": chart_image_values(release.image.ref),
        "rbac": {"serviceAccount": {"create": True, "name": SERVICE_ACCOUNT}},
        "nodeSelector": system_node_selector(),
        "extraArgs": {
            "balance-similar-node-groups": "true",
            "expander": "least-waste",
            "scale-down-unneeded-time": "10m",
            "scale-down-delay-after-add": "10m",
            "skip-nodes-with-local-storage": "false",
            "skip-nodes-with-system-pods": "false",
        },
        "resources": {"requests": {"cpu": "100m", "memory": "300Mi"}, "limits": {"memory": "600Mi"}},
    }
    if provisioning_request_crd is not None:
        values["extraArgs"]["enable-provisioning-requests"] = pulumi.Output.from_input(provisioning_request_crd).apply(
            lambda _: "true"
        )
        if not release.provisioning_requests_json:
            # A release whose ProvisioningRequest client inherits the global content type (protobuf) cannot write a
            # request's conditions, a custom resource's: every client of it talks JSON instead, the workaround
            # kubernetes/autoscaler#9546 names (AutoscalerRelease.provisioning_requests_json).
            values["extraArgs"]["kube-api-content-type"] = "application/json"
    return values


#: The CRD's name (``<plural>.<group>``).
PROVISIONING_REQUEST_CRD = "provisioningrequests.autoscaling.x-k8s.io"


def provisioning_request_crd(
    name: str, opts: Optional[pulumi.ResourceOptions] = None
) -> tuple[k8s.yaml.v2.ConfigFile, pulumi.Output[str]]:
    """The ProvisioningRequest CRD from the autoscaler's release tag (:data:`~components.catalog.MANIFESTS`
    ``provisioning-request-crd``), and its name resolving once it is applied: the autoscaler with
    ``--enable-provisioning-requests`` and Kueue's admission check controller need it at their start, so both are
    installed after it."""
    applied = k8s.yaml.v2.ConfigFile(name, file=MANIFESTS["provisioning-request-crd"].url, opts=opts)
    return applied, applied.urn.apply(lambda _: PROVISIONING_REQUEST_CRD)


class ClusterAutoscalerArgs(TypedDict):
    """Inputs of :class:`ClusterAutoscaler`."""

    cluster_name: pulumi.Input[str]
    """EKS cluster name (an Output that resolves once the cluster exists orders the autoscaler after it)."""
    kubernetes_version: str
    """Kubernetes minor; selects the chart and the image of the same minor."""
    region: str
    """AWS region of the cluster."""
    chart_version: NotRequired[str]
    """Override of the pinned chart version."""
    provisioning_request_crd: NotRequired[pulumi.Input[str]]
    """Handle ProvisioningRequests (Kueue's admission check): the ProvisioningRequest CRD's name, resolving once the
    CRD is applied (:func:`provisioning_request_crd`), which orders the release after it (the autoscaler reads
    requests only if the CRD exists when it starts)."""


class ClusterAutoscaler(pulumi.ComponentResource):
    """IAM role + Pod Identity association + Helm release of cluster-autoscaler (needs a
    ``kubernetes`` provider in ``opts``)."""

    role_arn: pulumi.Output[str]
    """IAM role the autoscaler runs as."""
    release_name: pulumi.Output[str]
    """Name of the Helm release."""

    @checks_args
    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:ClusterAutoscaler", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        cluster_name = pulumi.Output.from_input(args["cluster_name"])
        identity = pod_identity_role(
            self,
            name,
            cluster_name=cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            description=f"cluster-autoscaler (EKS Pod Identity, {NAMESPACE}/{SERVICE_ACCOUNT})",
            role_name=name,
            policy=cluster_name.apply(autoscaler_policy),
        )
        assert identity.association is not None
        after: list[pulumi.Resource] = [identity.association]
        if args.get("provisioning_request_crd") is not None:
            k8s.rbac.v1.ClusterRole(
                f"{name}-provisioning-requests",
                metadata={"name": PROVISIONING_REQUEST_ROLE},
                rules=[
                    {"api_groups": r["apiGroups"], "resources": r["resources"], "verbs": r["verbs"]}
                    for r in PROVISIONING_REQUEST_RULES
                ],
                opts=pulumi.ResourceOptions(parent=self),
            )
            after.append(
                k8s.rbac.v1.ClusterRoleBinding(
                    f"{name}-provisioning-requests",
                    metadata={"name": PROVISIONING_REQUEST_ROLE},
                    role_ref={
                        "api_group": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": PROVISIONING_REQUEST_ROLE,
                    },
                    subjects=[{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}],
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        release = pinned_release(
            self,
            name,
            CLUSTER_AUTOSCALER[args["kubernetes_version"]].chart,
            release_name="cluster-autoscaler",
            namespace=NAMESPACE,
            values=cluster_autoscaler_values(
                cluster_name,
                args["region"],
                args["kubernetes_version"],
                args.get("provisioning_request_crd"),
            ),
            version=args.get("chart_version"),
            depends_on=after,
        )
        self.role_arn = identity.role.arn
        self.release_name = release.name.apply(lambda n: n or "cluster-autoscaler")
        self.register_outputs({"role_arn": self.role_arn, "release_name": self.release_name})
