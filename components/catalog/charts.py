"""Third-party Helm charts and container images, installed at deploy time and pinned."""

from dataclasses import dataclass
from typing import Mapping, Optional

from components.catalog.gpus import GpuSupport


@dataclass(frozen=True, kw_only=True)
class HelmChart:
    """A vendor's Helm chart, version pinned."""

    chart: str
    """Chart name in the repository."""
    repo: str
    """Helm repository URL."""
    version: str
    """Pinned chart version."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""


#: Helm charts by key (cluster-autoscaler: see :data:`CLUSTER_AUTOSCALER`, one chart per Kubernetes minor).
HELM_CHARTS: Mapping[str, HelmChart] = {
    "nvidia-device-plugin": HelmChart(
        chart="nvidia-device-plugin",
        repo="https://nvidia.github.io/k8s-device-plugin",
        version="0.20.0",
        source="nvidia-device-plugin-chart",
    ),
    "aws-efa-k8s-device-plugin": HelmChart(
        chart="aws-efa-k8s-device-plugin",
        repo="https://aws.github.io/eks-charts",
        version="v0.5.30",
        source="efa-device-plugin-chart",
    ),
    # Kueue, the Kubernetes SIG's job queueing controller (admission, quotas, priorities): the chart of the
    # release, published as an OCI artifact (``chart`` is appended to ``repo``: oci://registry.k8s.io/kueue/charts/kueue).
    # The box runs the same release built from sigs.k8s.io/kueue at the same version (box/kueue/go.mod).
    "kueue": HelmChart(
        chart="kueue",
        repo="oci://registry.k8s.io/kueue/charts",
        version="0.19.1",
        source="kueue-chart",
    ),
}


#: The instance types the EFA chart v0.5.30's default values schedule its DaemonSet on (``supportedInstanceLabels``,
#: an affinity on node.kubernetes.io/instance-type), those of the families this project catalogues
#: (https://github.com/aws/eks-charts/blob/bfe91c4b9257c80f754ad4b3d6a9a3c239b2b8ec/stable/aws-efa-k8s-device-plugin/values.yaml,
#: the commit that made chart v0.5.30; template: stable/aws-efa-k8s-device-plugin/templates/daemonset.yaml). The
#: stack's values replace the list with the EFA node label (:func:`components.device_plugins.efa_device_plugin_values`),
#: so a type the chart does not list still gets its EFA devices; the box renders the default when values leave it.
EFA_CHART_INSTANCE_TYPES: tuple[str, ...] = (
    "g4dn.8xlarge",
    "g4dn.12xlarge",
    "g4dn.16xlarge",
    "g4dn.metal",
    "g5.8xlarge",
    "g5.12xlarge",
    "g5.16xlarge",
    "g5.24xlarge",
    "g5.48xlarge",
    "g6.8xlarge",
    "g6.12xlarge",
    "g6.16xlarge",
    "g6.24xlarge",
    "g6.48xlarge",
    "g6e.8xlarge",
    "g6e.12xlarge",
    "g6e.16xlarge",
    "g6e.24xlarge",
    "g6e.48xlarge",
    "p3dn.24xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5.4xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
)


@dataclass(frozen=True, kw_only=True)
class PinnedImage:
    """A container image the catalog pins by digest, with the public source that shows the digest."""

    ref: str
    """``registry/repository:tag@sha256:<digest>``: the tag says which release, the digest is what is pulled (the
    multi-arch index the publisher maps the tag to)."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` whose ``shows`` quotes the tag and the digest
    (``sha256:`` + its first 12 and last 5 characters; ``tests/unit/test_catalog.py``)."""


#: The controller images the Helm releases run, pinned by digest, by chart key; the chart's values take the reference
#: (``chart_image_values``). cluster-autoscaler's are per Kubernetes minor (:data:`CLUSTER_AUTOSCALER`). A release
#: whose chart key is not here runs an image its chart names by tag (tests/mock/test_pod_security.py lists them and
#: why).
CHART_IMAGES: Mapping[str, PinnedImage] = {
    # Kueue's controller: the release the chart version names, from the Kubernetes project's registry (the chart's
    # own default is a staging registry with ``pullPolicy: Always``), pinned by the digest its image promoter
    # publishes. The chart writes ``repository:tag``, so the tag carries the digest.
    "kueue": PinnedImage(
        ref="registry.k8s.io/kueue/kueue:v0.19.1@sha256:7a2204a64388f51a0239f22df989b62390ec1b3d21424ee3a35be7bbc23f9f8f",
        source="kueue-image",
    ),
    # NVIDIA's device plugin at the chart's appVersion (the chart's default tag, ``v`` + appVersion), pinned by the
    # digest NVIDIA's own GPU Operator pins for the same tag. The chart writes ``repository:tag``
    # (templates/_helpers.tpl ``nvidia-device-plugin.fullimage``), so the tag carries the digest.
    "nvidia-device-plugin": PinnedImage(
        ref="nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd8efb82f3a79f877f7580e02c1e8e7593f62473644bc9c79e315c3312",
        source="nvidia-device-plugin-image",
    ),
}


def chart_image_values(ref: str) -> dict[str, str]:
    """``{"repository", "tag"}`` of a Helm chart whose template writes ``repository:tag``: a reference pinned by
    digest keeps it in the tag (``v1.2.3@sha256:...``), which renders ``repository:v1.2.3@sha256:...``, a reference
    the container runtime pulls by digest
    (https://github.com/opencontainers/distribution-spec/blob/967efdc079b91785ad18c77cc4f8991a47feefbf/spec.md)."""
    name, _, digest = ref.partition("@")
    repository, tag = name.rsplit(":", 1)
    return {"repository": repository, "tag": f"{tag}@{digest}" if digest else tag}


@dataclass(frozen=True, kw_only=True)
class AutoscalerRelease:
    """cluster-autoscaler for one Kubernetes minor: the chart and the image (the autoscaler's minor must
    match the cluster's; the chart's default image is older than the newest patch, so it is set)."""

    chart: HelmChart
    image: PinnedImage
    """The autoscaler of the cluster's minor, pinned by the digest the Kubernetes image promoter maps its tag to."""
    clusterrole: str
    """The chart's ClusterRole template at its release tag, which grants ``storage.k8s.io/volumeattachments``:
    autoscaler 1.32+ waits for that informer before it scales (https://github.com/kubernetes/autoscaler/issues/7663),
    and the chart has it since 9.46.3."""
    provisioning_requests_json: bool
    """Whether this release's ProvisioningRequest client talks JSON to the apiserver by itself. A ProvisioningRequest
    is a custom resource, which cannot be encoded as protobuf, the autoscaler's default content type: without JSON the
    autoscaler cannot write a request's Accepted condition, so no request is ever provisioned (kubernetes/autoscaler
    #8855). Fixed by #9546 and its cherry-picks to 1.33-1.35 (#10014-#10016); no 1.32 release has it. Source key
    ``ca-provreq-json``."""


_CA_REPO = "https://kubernetes.github.io/autoscaler"
_CA_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
_CA_TREE = "https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-chart-"


def _ca(
    chart: str, image_tag: str, digest: str, template_path: str, provisioning_requests_json: bool = True
) -> AutoscalerRelease:
    return AutoscalerRelease(
        chart=HelmChart(chart="cluster-autoscaler", repo=_CA_REPO, version=chart, source="cluster-autoscaler-chart"),
        image=PinnedImage(ref=f"{_CA_IMAGE}:{image_tag}@{digest}", source="cluster-autoscaler-images"),
        clusterrole=f"{_CA_TREE}{chart}/{template_path}",
        provisioning_requests_json=provisioning_requests_json,
    )


_ROLE = "charts/cluster-autoscaler/templates/clusterrole.yaml"
#: cluster-autoscaler per Kubernetes minor (source keys ``cluster-autoscaler-chart``,
#: ``cluster-autoscaler-releases``), each image at the digest of the Kubernetes image promoter's manifest (source key
#: ``cluster-autoscaler-images``); every chart's deployment template writes ``repository:tag``, so the tag carries
#: the digest (``chart_image_values``). No chart targets 1.36 yet: the newest (9.59.0) runs the 1.36 image.
CLUSTER_AUTOSCALER: Mapping[str, AutoscalerRelease] = {
    "1.32": _ca(
        "9.46.6",
        "v1.32.7",
        "sha256:b3a6d87dbd23b17c6bc8cf8436fc5eeca668f343d3a0fd86202a4ffaa2f8eb06",
        _ROLE,
        provisioning_requests_json=False,
    ),
    "1.33": _ca("9.51.0", "v1.33.6", "sha256:7b44e0f075b2c8f9952e339b6c396cd4d1c3831c24c0fe092a3e708c45e6ec51", _ROLE),
    "1.34": _ca(
        "9.53.0",
        "v1.34.5",
        "sha256:5c3a56440ffc76eac79e7d7e840153c1fbe7b6e02d415e76a45ba2e0ef99a266",
        f"cluster-autoscaler/{_ROLE}",
    ),
    "1.35": _ca(
        "9.59.0",
        "v1.35.2",
        "sha256:aac369dc283927a623deb1af54696efcc722ae79255aa07788422e495bab887d",
        f"cluster-autoscaler/{_ROLE}",
    ),
    "1.36": _ca(
        "9.59.0",
        "v1.36.1",
        "sha256:461388d03eb5b55db58941ee7a81d9a619dd15302b01cbab9f5a9946715994b4",
        f"cluster-autoscaler/{_ROLE}",
    ),
}
#: The oldest chart whose ClusterRole has ``volumeattachments``.
CA_CHART_WITH_VOLUMEATTACHMENTS = (9, 46, 3)


@dataclass(frozen=True, kw_only=True)
class ReleaseManifest:
    """A vendor's release manifest (when there is no official Helm chart), applied at deploy time, pinned."""

    url: str
    """The manifest at its release tag."""
    version: str
    source: str
    """Key of :data:`components.catalog.sources.SOURCES`."""
    controller: Optional[tuple[str, str]] = None
    """The namespace and name of the controller's Deployment the manifest runs (its nodes are set by a patch);
    ``None``: the manifest only defines (CRDs)."""


#: The first Kueue release whose scheduler's second pass (topology assignment after the ProvisioningRequest admission
#: check, for a workload that already holds its quota) does not count the workload's own reservation again: up to
#: v0.17.2 ``flavorassigner.assignFlavors`` seeded the second pass with one of a pod set's flavors only, so every other
#: resource was fitted again against quota that already included the workload, and a job of more than half an
#: autoscaled group waited for ever (kubernetes-sigs/kueue#11005, in the release-0.17 branch as #11039, released in
#: v0.17.3 and v0.18.0; reported as kubernetes-sigs/kueue#9048). The pinned chart must be at least this: autoscaled
#: topology-aware groups are on by default (stacks/plan/admission.py ``with_topology``; tests/unit/test_catalog.py).
#: Source key ``kueue-second-pass-fix``.
KUEUE_SECOND_PASS_FIX = (0, 17, 3)


#: Release manifests by key.
MANIFESTS: Mapping[str, ReleaseManifest] = {
    # The Kubeflow MPI Operator (MPIJob kubeflow.org/v2beta1) has no official Helm chart; its README
    # installs this manifest (a CRD, RBAC and the operator Deployment with image mpioperator/mpi-operator:0.8.0,
    # no node selector).
    "mpi-operator": ReleaseManifest(
        url="https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.0/deploy/v2beta1/mpi-operator.yaml",
        version="v0.8.0",
        source="mpi-operator",
        controller=("mpi-operator", "mpi-operator"),
    ),
    # The ProvisioningRequest CRD (autoscaling.x-k8s.io/v1) the cluster autoscaler reads with
    # --enable-provisioning-requests and Kueue's ProvisioningRequest admission check writes: no chart installs it
    # (the cluster-autoscaler chart does not ship CRDs), the autoscaler's repository publishes it under
    # cluster-autoscaler/apis/config/crd at each release tag; pinned at the release of the newest minor's autoscaler.
    "provisioning-request-crd": ReleaseManifest(
        url="https://raw.githubusercontent.com/kubernetes/autoscaler/cluster-autoscaler-1.36.1/cluster-autoscaler/apis/"
        "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml",
        version="cluster-autoscaler-1.36.1",
        source="ca-provisioning-request-crd",
    ),
}

#: Container images the workloads run, pinned by digest.
IMAGES: Mapping[str, PinnedImage] = {
    # etcd 3.5 is the last release with the v2 API torchrun's etcd-v2 rendezvous needs (source key
    # ``etcd-v2-rendezvous``); the Kubernetes project's build, pinned by the digest its image promoter publishes.
    "etcd": PinnedImage(
        ref="registry.k8s.io/etcd:3.5.21-0@sha256:d58c035df557080a27387d687092e3fc2b64c6d0e3162dc51453a115f847d121",
        source="etcd-image",
    ),
    # A shell with chown for the one-shot Job that hands a new Lustre file system's directories to the
    # training image's user: the Kubernetes project's busybox build (the one its e2e tests use), pinned by
    # the digest its image promoter publishes.
    "busybox": PinnedImage(
        ref="registry.k8s.io/e2e-test-images/busybox:1.37.0-1@sha256:0ffbe172f8d245c83f285c6992b452c53d085661e03ddfd3b484332026e6c8bb",
        source="busybox-image",
    ),
}


@dataclass(frozen=True, kw_only=True)
class BaseImage:
    """A base image the Dockerfiles of this repository build on (``FROM``), pinned by digest."""

    ref: str
    """``registry/repository:tag@sha256:<index digest>``, exactly as the Dockerfiles write it."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` (where the digest is published)."""
    gpus: Optional[GpuSupport] = None
    """The GPUs the GPU code the base ships (a framework and its libraries) supports, as its publisher states it.
    ``None``: the base ships no GPU code an image runs as it is (an OS; a CUDA toolkit, whose users compile their
    own kernels, checked by their ``-gencode`` targets). ``stacks/config/rules.py`` refuses a job whose image's
    final base does not support the GPU of its group."""
    python_packages: frozenset[str] = frozenset()
    """The Python frameworks the base ships installed (``tensorflow``); empty: none (an OS, a CUDA toolkit). A job
    whose kind needs a framework its image neither inherits nor installs is refused
    (:func:`stacks.config.rules.kind_images.check_image_package`)."""


#: Base images of ``training/`` and ``images/*`` pinned by digest (every ``FROM`` of the repository is pinned:
#: ``tests/unit/test_image_rules.py``), most from Amazon ECR Public. CodeBuild pulls them: Docker
#: Hub limits anonymous pulls per address and CodeBuild shares its addresses (source keys ``docker-hub-limits``,
#: ``codebuild-docker-hub-429``), ECR Public serves anonymous and authenticated pulls under its own quotas
#: (source key ``ecr-public-pulls``). NVIDIA's bases stay on nvcr.io. ``tests/unit/test_dockerfiles.py`` keeps every
#: Dockerfile off Docker Hub and every base of every Dockerfile equal to an entry here, whose source shows its digest.
BASE_IMAGES: Mapping[str, BaseImage] = {
    # Ubuntu 24.04 (Python 3.12): the Docker Official Image as ECR Public mirrors it, at the index digest AWS
    # pins in its own images (source key ``ubuntu-24.04-digest``).
    "ubuntu-24.04": BaseImage(
        ref="public.ecr.aws/docker/library/ubuntu:24.04@sha256:b359f1067efa76f37863778f7b6d0e8d911e3ee8efa807ad01fbf5dc1ef9006b",
        source="ubuntu-24.04-digest",
    ),
    # CUDA 12.9.1 devel on Ubuntu 22.04 (images/nccl-tests, the version AWS's nccl-tests image builds on) from
    # NVIDIA's registry, at the index digest NVIDIA publishes for the tag (source key ``cuda-12.9.1-devel-digest``).
    # A registry serving other content under it fails the pull rather than change the image.
    "cuda-12.9.1-devel-ubuntu22.04": BaseImage(
        ref="nvcr.io/nvidia/cuda:12.9.1-devel-ubuntu22.04@sha256:bd4e2680a261c212f1e2fea241606f71497dc67a417f73175d794ec8212b5ba8",
        source="cuda-12.9.1-devel-digest",
    ),
    # NGC TensorFlow 25.02 (images/horovod: TF 2.17 with the Horovod NVIDIA builds into it, Open MPI under
    # /usr/local/mpi), at the digest a public recipe pins for the same tag (source key ``ngc-tensorflow-25.02-digest``).
    # NGC's framework containers support compute capability 7.5 and later from release 25.01 on (CUDA 12.8): Turing,
    # Ampere, Hopper, Ada Lovelace and Blackwell, not Volta (V100, p3) any more, which 24.12 still listed (source key
    # ``ngc-25.01-gpu-requirements``).
    "tensorflow-25.02-tf2-py3": BaseImage(
        ref="nvcr.io/nvidia/tensorflow:25.02-tf2-py3@sha256:c83b37d26f19ab00d8a13cf974edd079c3d099918ec3110c304a989d6e2f75d5",
        source="ngc-tensorflow-25.02-digest",
        gpus=GpuSupport(min_compute_capability=(7, 5), source="ngc-25.01-gpu-requirements"),
        python_packages=frozenset({"tensorflow"}),
    ),
}


def base_image(ref: str) -> Optional[BaseImage]:
    """The catalogued base image a ``FROM`` (or a prebuilt image) names, by ``repository:tag`` with or without a
    digest: the tag names the publisher's release its facts are about (``None``: not one of :data:`BASE_IMAGES`)."""
    name = ref.partition("@")[0]
    return next((b for b in BASE_IMAGES.values() if b.ref.partition("@")[0] == name), None)


#: Installers a Dockerfile runs that install their dependencies with the system's package manager, so the package
#: index must be present when they run (``apt-get update`` before, the lists not yet removed): AWS's EFA
#: installer installs its dependencies with ``apt-get install`` on Ubuntu and Debian, after the user has refreshed
#: the index (source key ``efa-installer-apt``). A Dockerfile that deleted ``/var/lib/apt/lists`` first fails to
#: build ("Unable to locate package"). ``tests/unit/test_image_rules.py`` applies this to every Dockerfile.
INSTALLERS_USING_APT: Mapping[str, str] = {
    "efa_installer.sh": "efa-installer-apt",
}
