"""The Kubeflow MPI Operator, installed from its release manifest (pinned in the catalog): the controller that runs
an :class:`~components.workloads.mpi.MpiJob`'s launcher and workers."""

from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import MANIFESTS, ReleaseManifest
from components.conventions import PATCH_FIELD_MANAGER
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.scheduling import system_node_selector


class MpiOperatorArgs(TypedDict):
    """Inputs of :class:`MpiOperator`."""

    version: NotRequired[str]
    """Override of the release pinned in the catalog (a tag of github.com/kubeflow/mpi-operator)."""
    node_selector: NotRequired[Mapping[str, str]]
    """The nodes the operator runs on (default: the system group's, :func:`components.scheduling.system_node_selector`);
    ``{}`` leaves it where the scheduler puts it."""


class MpiOperator(pulumi.ComponentResource):
    """The Kubeflow MPI Operator from its release manifest (CRD, RBAC, Deployment in ``mpi-operator``),
    applied with server-side apply (the CRD is too large for client-side apply), its Deployment moved to
    ``node_selector``'s nodes by a patch. Needs a ``kubernetes`` provider in ``opts``."""

    crd_name: pulumi.Output[str]
    """``mpijobs.kubeflow.org``; resolves once the manifest is applied (MPIJobs built from it come after)."""
    version: pulumi.Output[str]
    """The operator release installed."""

    @checks_args
    def __init__(self, name: str, args: MpiOperatorArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:MpiOperator", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        manifest = MANIFESTS["mpi-operator"]
        version = args.get("version") or manifest.version
        url = manifest.url.replace(f"/{manifest.version}/", f"/{version}/")
        applied = k8s.yaml.v2.ConfigFile(f"{name}-manifest", file=url, opts=pulumi.ResourceOptions(parent=self))
        node_selector = args.get("node_selector", system_node_selector())
        if node_selector:
            place_controller(f"{name}-placement", manifest, node_selector, self, applied)
        self.crd_name = applied.urn.apply(lambda _: "mpijobs.kubeflow.org")
        self.version = pulumi.Output.from_input(version)
        self.register_outputs({"crd_name": self.crd_name, "version": self.version})


def place_controller(
    name: str,
    manifest: ReleaseManifest,
    node_selector: Mapping[str, str],
    parent: pulumi.Resource,
    applied: pulumi.Resource,
) -> k8s.apps.v1.DeploymentPatch:
    """A server-side apply patch of the node selector of ``manifest``'s controller Deployment, under a field manager
    of its own (``name``), after the manifest is ``applied``; the provider waits for the Deployment's rollout."""
    assert manifest.controller is not None, f"{manifest.url} runs no controller"
    namespace, deployment = manifest.controller
    return k8s.apps.v1.DeploymentPatch(
        name,
        metadata=k8s.meta.v1.ObjectMetaPatchArgs(
            name=deployment, namespace=namespace, annotations={PATCH_FIELD_MANAGER: name}
        ),
        spec=k8s.apps.v1.DeploymentSpecPatchArgs(
            template=k8s.core.v1.PodTemplateSpecPatchArgs(
                spec=k8s.core.v1.PodSpecPatchArgs(node_selector=dict(node_selector))
            )
        ),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[applied]),
    )
