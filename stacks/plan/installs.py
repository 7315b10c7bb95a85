"""What a cluster stack installs beside its own jobs, and at which versions this version of the project pins them.

Each update records the versions (:func:`installed_versions`, the stack output ``deployedVersions``), each node
group's launch template digest (:mod:`stacks.plan.templates`), the AMI release it runs (:mod:`stacks.plan.nodes`) and
what its Kueue flavor was applied with (:mod:`stacks.plan.flavor_change`).
The next one compares the record with the same configuration under the new version of the project
(:func:`version_moves`), so ``pulumi up``'s summary names what a new version moves: a chart, an operator, an add-on
pin, etcd. A launch template it changes is a roll of its group, which the summary's node groups name
(:func:`stacks.plan.upgrade.compare`); a pinned release is compared with the one the group runs. Its add-ons' lines
and the VPC CNI's one-minor step start from the record too (:func:`stacks.plan.addon_changes.deployed_version`).
"""

from typing import Collection, Mapping, Optional

from components.catalog.addons import addon_version_for
from components.catalog.charts import CHART_IMAGES, CLUSTER_AUTOSCALER, HELM_CHARTS, IMAGES, MANIFESTS
from stacks.kinds import KINDS
from stacks.plan import Plan
from stacks.plan.flavor_change import FLAVOR_SUFFIX, flavor_records
from stacks.plan.job_changes import BUILD_SUFFIX, image_builds
from stacks.plan.storage_change import FSX_RECORD, fsx_record
from stacks.plan.templates import TEMPLATE_SUFFIX, template_digests

#: How the record names an EKS add-on that runs at EKS's default for its minor (no pin, no override).
EKS_DEFAULT = "EKS's default"


def uses_etcd(plan: Plan) -> bool:
    """Some job rendezvouses through etcd: the stack runs one (``EtcdRendezvous``)."""
    return any(KINDS[j.kind].needs_etcd(j.config) for j in plan.jobs.values())


def runs_mpi_operator(plan: Plan) -> bool:
    """The cluster stack runs the MPI Operator: one of its jobs needs it, or its teams may run MPI jobs."""
    return bool(plan.config.teams) or any(KINDS[j.kind].needs_mpi_operator for j in plan.jobs.values())


def _image(ref: str) -> str:
    """An image reference as the record keeps it: its tag and the digest's first 12 characters."""
    name, _, digest = ref.partition("@")
    return f"{name.rsplit(':', 1)[1]}" + (f"@{digest[:19]}" if digest else "")


def autoscaler_version(minor: str) -> str:
    """The cluster autoscaler's release for a Kubernetes minor, as the record and the upgrade summary name it."""
    release = CLUSTER_AUTOSCALER[minor]
    return f"chart {release.chart.version}, image {_image(release.image.ref)}"


def installed_versions(plan: Plan) -> dict[str, str]:
    """The version of each thing the cluster stack of ``plan`` installs, by name, as this version of the project pins
    it: its EKS add-ons, Kueue, the device plugins, the cluster autoscaler, the MPI Operator, the ProvisioningRequest
    CRD and etcd; the fixed settings of the FSx file system it makes; then the builds of the images the jobs run, each
    node group's launch template digest and what its Kueue flavor is applied with."""
    cluster = plan.config.cluster
    out = {
        addon: addon_version_for(addon, cluster.kubernetes_version, cluster.addon_versions) or EKS_DEFAULT
        for addon in plan.addons
    }
    if plan.admission is not None:
        out["kueue"] = f"chart {HELM_CHARTS['kueue'].version}, image {_image(CHART_IMAGES['kueue'].ref)}"
        if plan.admission.provisioning is not None:
            out["provisioning-request-crd"] = MANIFESTS["provisioning-request-crd"].version
    if plan.gpu:
        out["nvidia-device-plugin"] = (
            f"chart {HELM_CHARTS['nvidia-device-plugin'].version}, "
            f"image {_image(CHART_IMAGES['nvidia-device-plugin'].ref)}"
        )
    if plan.efa:
        out["aws-efa-k8s-device-plugin"] = f"chart {HELM_CHARTS['aws-efa-k8s-device-plugin'].version}"
    if plan.autoscale:
        out["cluster-autoscaler"] = autoscaler_version(cluster.kubernetes_version)
    if runs_mpi_operator(plan):
        out["mpi-operator"] = MANIFESTS["mpi-operator"].version
    if uses_etcd(plan):
        out["etcd"] = _image(IMAGES["etcd"].ref)
    if (fsx := fsx_record(plan)) is not None:
        out[FSX_RECORD] = fsx
    return {**out, **image_builds(plan), **template_digests(plan), **flavor_records(plan)}


def version_moves(
    recorded: Optional[Mapping[str, object]], old: Plan, new: Plan, said: Collection[str] = ()
) -> list[tuple[str, str, str]]:
    """``(name, recorded version, version now)`` of each thing this version of the project moves: the record differs
    from what the recorded configuration ``old`` installs now, and ``new`` (this update's plan) still installs it at
    another version than the record's. Names the stack file's own changes already list (``said``) are left to them,
    the images' builds to the jobs they start again, the launch templates to the node groups' rolls and the flavors to
    :func:`~stacks.plan.flavor_change.flavor_problems`; none without a readable record. In ``new``'s order."""
    if not isinstance(recorded, Mapping):
        return []
    before, after = installed_versions(old), installed_versions(new)
    return [
        (n, str(recorded[n]), v)
        for n, v in after.items()
        if n in recorded
        and n in before
        and n not in said
        and not n.endswith((BUILD_SUFFIX, TEMPLATE_SUFFIX, FLAVOR_SUFFIX))
        and str(recorded[n]) not in (before[n], v)
    ]


def render_moves(moves: list[tuple[str, str, str]]) -> str:
    """The summary's lines for :func:`version_moves`."""
    lines = [f"  {name}: {was} -> {now}" for name, was, now in moves]
    return (
        "This version of the project moves, at the configuration the stack's last finished update recorded "
        "(docs/how-to/update-project.md says what each move does):\n" + "\n".join(lines)
    )
