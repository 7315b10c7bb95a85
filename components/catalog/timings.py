"""How long `pulumi up` takes to create each kind of resource: the durations the plan report's model of the path to
the first training step adds up (:mod:`stacks.plan.timeline`).

Each figure names its public source, or says ``estimate`` and why where no public source gives one. They are a model,
in minutes, to compare paths with: not a promise of how long a deployment takes.
"""

from dataclasses import dataclass
from typing import Mapping

from components.catalog.platform import EVICTION_LIMIT_MINUTES


@dataclass(frozen=True, kw_only=True)
class Duration:
    """How long one step takes, in minutes."""

    minutes: float
    what: str
    """What takes that long."""
    sources: tuple[str, ...] = ()
    """Keys of :data:`components.catalog.sources.SOURCES` the figure comes from."""
    estimate: str = ""
    """Why the figure, where it is an estimate (no source gives it, or the model takes one end of a range)."""


#: A Deployment's creation, or a patch's rollout: what the provider awaits for both.
_DEPLOYMENT = Duration(
    minutes=0.5,
    what="a Deployment (new, or patched) until its pods are available",
    sources=("pulumi-kubernetes-deployment-await",),
    estimate="no public figure for the time; the source says what is waited for",
)

#: Creation by resource type token (the type a registration carries).
CREATION: Mapping[str, Duration] = {
    "eks:index:Cluster": Duration(
        minutes=13.0,
        what="the EKS control plane and what pulumi-eks creates with it (its IAM role, security groups, access "
        "entries)",
        sources=("eks-cluster-creation-roadmap", "eks-cluster-creation-measured"),
        estimate="EKS reported 15 minutes on average, an unofficial measurement 13 to 16 minutes across Regions; the "
        "model takes 13, the low end, so the rest of the path weighs more against it, not less",
    ),
    "aws:eks/nodeGroup:NodeGroup": Duration(
        minutes=4.0,
        what="a managed node group: instances launched, booted, registered and Ready",
        estimate="no public figure; EC2 launch and boot plus the kubelet's registration take a few minutes",
    ),
    "aws:eks/addon:Addon": Duration(
        minutes=1.0,
        what="an EKS managed add-on until ACTIVE",
        estimate="no public figure; EKS applies the add-on's manifests and waits for its workloads",
    ),
    "aws:ec2/natGateway:NatGateway": Duration(
        minutes=2.0, what="a NAT gateway until available", estimate="no public figure; a few minutes when observed"
    ),
    "aws:efs/fileSystem:FileSystem": Duration(
        minutes=0.5, what="an EFS file system until available", estimate="no public figure"
    ),
    "aws:efs/mountTarget:MountTarget": Duration(
        minutes=1.5, what="an EFS mount target until available", estimate="no public figure"
    ),
    "aws:fsx/lustreFileSystem:LustreFileSystem": Duration(
        minutes=8.0,
        what="an FSx for Lustre file system until AVAILABLE",
        estimate="no public figure; FSx documents only that creation returns while the file system is CREATING",
    ),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": Duration(
        minutes=2.0,
        what="an FSx data repository association until AVAILABLE",
        estimate="no public figure; the association is created on the running file system",
    ),
    "pulumi-python:dynamic/eks-training:ImageBuild": Duration(
        minutes=6.0,
        what="an image build: CodeBuild provisions a builder, builds the Dockerfile and pushes to ECR",
        estimate="no public figure; builder start-up and a build of a few layers",
    ),
    "kubernetes:helm.sh/v3:Release": Duration(
        minutes=1.0,
        what="a Helm release until its workloads are ready (image pulls and start, webhooks serving)",
        estimate="no public figure",
    ),
    "kubernetes:yaml/v2:ConfigFile": Duration(
        minutes=0.5,
        what="a release manifest that runs a controller, applied whole, until its Deployment is available (the MPI "
        "Operator; a manifest of definitions only takes a Kubernetes object's time)",
        sources=("pulumi-kubernetes-deployment-await",),
        estimate="as a Deployment",
    ),
    "kubernetes:apps/v1:Deployment": _DEPLOYMENT,
    # the provider awaits a patched Deployment's rollout as it awaits a new one (the MPI Operator moved to system nodes)
    "kubernetes:apps/v1:DeploymentPatch": _DEPLOYMENT,
    "kubernetes:apps/v1:DaemonSet": Duration(
        minutes=0.5,
        what="a DaemonSet until its pods are available",
        estimate="as a Deployment",
    ),
}

#: Rolling one node of a managed node group (a new AMI release, Kubernetes minor or launch template): its pods
#: evicted, which EKS allows :data:`~components.catalog.platform.EVICTION_LIMIT_MINUTES`, then its replacement
#: launched, registered and Ready.
NODE_ROLL = Duration(
    minutes=20.0,
    what=f"one node of a managed node group rolled: drained (up to EKS's {EVICTION_LIMIT_MINUTES}-minute eviction "
    "limit), replaced and Ready",
    sources=("eks-managed-node-update",),
    estimate=f"the {EVICTION_LIMIT_MINUTES}-minute limit plus a new node's 4 minutes (the node group's creation "
    "above), rounded up",
)
#: The ``DEFAULT`` update strategy's scale-up: new nodes launched and Ready before the first old node is drained
#: (``MINIMAL`` has none: each node's replacement is launched after it goes, within :data:`NODE_ROLL`).
NODE_SURGE = Duration(
    minutes=4.0,
    what="a roll's scale-up (DEFAULT update strategy): the new nodes launched, registered and Ready",
    sources=("eks-managed-node-update", "eks-nodegroup-update-config"),
    estimate="as a node group's creation above: the new nodes launch side by side",
)
#: pulumi-aws's own wait for a node group's create, update or delete (Terraform's aws_eks_node_group default).
PROVIDER_NODE_GROUP_WAIT = Duration(
    minutes=60.0, what="the provider's default wait", sources=("tf-eks-node-group-timeouts",)
)

#: How long `pulumi up` waits for the data repository association that imports the data bucket's listing (batch
#: import on create). Its creation has outlasted the provider's 10 minutes, and pulumi-aws then fails while FSx goes
#: on making it. FSx runs the listing's import after the association is made.
FSX_IMPORT_ASSOCIATION_WAIT = Duration(
    minutes=120.0,
    what="the wait for a data repository association that imports an existing bucket's listing",
    sources=("tf-fsx-dra-timeouts", "fsx-dra-import-outlasts-default", "fsx-import-millions-of-objects"),
    estimate="no public figure for an association's creation; one outlasted 10 minutes, and an import of a bucket of "
    "over 4 million objects at a file system's creation took more than an hour, so two hours before `pulumi up` "
    "reports a failure",
)

#: How long `pulumi up` waits for an FSx file system's update: a new throughput tier can keep it unavailable for up
#: to an hour, longer than the provider's 30 minutes.
FSX_UPDATE_WAIT = Duration(
    minutes=90.0,
    what="the wait for an FSx file system's update (a new throughput tier, more capacity or metadata IOPS)",
    sources=("tf-fsx-lustre-timeouts", "fsx-throughput-change"),
    estimate="the hour FSx gives for a throughput change, and half as much again before `pulumi up` reports a failure",
)

#: A Kubernetes object whose creation Pulumi does not wait on beyond the API server's answer.
KUBERNETES_OBJECT = Duration(
    minutes=0.05, what="another Kubernetes object (the API server's answer)", estimate="seconds"
)
#: Any other AWS resource (IAM, security groups and rules, subnets, route tables, KMS, S3, ECR, CloudWatch...).
AWS_RESOURCE = Duration(
    minutes=0.2,
    what="another AWS resource (IAM, a security group or rule, a subnet, a route table, a bucket...)",
    estimate="seconds to a few tens of seconds; the middle of 0.1 to 0.3 minutes",
)
#: Anything else (a provider, a dynamic resource that is not a build): configured, not created.
OTHER = Duration(minutes=0.0, what="a provider or a local resource", estimate="no remote call to wait for")

#: A Job Pulumi waits for (no ``pulumi.com/skipAwait``), or a custom resource it waits on (``pulumi.com/waitFor``): its
#: pods start (the image pull dominates) and run to completion.
FINISHED_JOB = Duration(
    minutes=2.0,
    what="a Job Pulumi waits for: its pods start (the image pulled) and it completes",
    sources=("pulumi-kubernetes-job-await",),
    estimate="no public figure for the time; a short job (a health check, a staging copy) of a training image",
)
#: The same for a Job of one of the catalog's small pinned helper images (components.catalog.IMAGES: busybox...).
FINISHED_HELPER_JOB = Duration(
    minutes=0.25,
    what="a Job Pulumi waits for, of a small pinned helper image (a pull of megabytes, a run of seconds)",
    sources=("pulumi-kubernetes-job-await",),
    estimate="no public figure; scheduling, the pull, the run and the Job controller's completion take tens of seconds",
)
#: A Job Pulumi waits for whose images are on its nodes already (pre-pulled, :mod:`stacks.plan.prepull`): the run
#: without the pull.
FINISHED_JOB_CACHED = Duration(
    minutes=0.5,
    what="a Job Pulumi waits for, its image already on its nodes: scheduled, started, run (a health check's few "
    "all-reduces, a small dataset's copy) and completed",
    sources=("pulumi-kubernetes-job-await",),
    estimate="no public figure; the containers' start takes seconds (as the training pods' start from a cached image) "
    "and a short job's run tens of seconds",
)
#: The first training step: the training job's pods scheduled, their image pulled, the containers started.
PODS_START = Duration(
    minutes=2.0,
    what="the training pods' start: scheduled, the image pulled, the containers started",
    estimate="no public figure; a training image is gigabytes",
)
#: The same when the training image is already on the nodes (the job's health check ran it there just before).
PODS_START_CACHED = Duration(
    minutes=0.25,
    what="the training pods' start with the image already on the nodes (IfNotPresent, pinned by digest)",
    estimate="no public figure; admission, scheduling and the containers' start take seconds",
)
#: Updating the EKS control plane to the next Kubernetes minor (``pulumi up`` after ``kubernetesVersion`` moves).
CONTROL_PLANE_UPGRADE = Duration(
    minutes=10.0,
    what="the EKS control plane updated to the next Kubernetes minor (the cluster stays available meanwhile)",
    sources=("eks-update-cluster",),
    estimate="EKS says only that an update should finish within a few minutes; the model takes the control plane's "
    "creation time, an upper estimate; a real account's update time is not measured here",
)
