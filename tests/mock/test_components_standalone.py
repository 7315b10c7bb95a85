"""The components work on their own in another project's program: the components guide's example
(``docs/how-to/components.md``) runs under mocks."""

from pathlib import Path

import pytest

from components.catalog.amis import RELEASE_VERSION_RE, release_version
from components.catalog.platform import DEFAULT_KUBERNETES_VERSION
from components.scheduling import NODE_ROLE_LABEL, TAINT_EFFECTS_EKS
from stacks.config import load_config
from stacks.plan import build_plan
from tests.harness import PROJECT, guide_example, run_program, stack_config, stack_names


def readme_example(tmp_path: Path) -> Path:
    path = tmp_path / "__main__.py"
    # the package as the checkout names it (setup.py installs components as eks_training.components;
    # tests/real/test_installed_real.py runs the example as written, from an install)
    path.write_text(guide_example().replace("eks_training.", ""))
    return path


def test_readme_example_registers_the_components(tmp_path: Path) -> None:
    for preview in (False, True):
        p = run_program("dev", preview=preview, config={"aws:region": "us-west-2"}, main=readme_example(tmp_path))
        types = [r.type for r in p.registrations]
        for t in ("TrainingVpc", "TrainingCluster", "TrainingNodeGroup", "DevicePlugin", "EfsStorage", "CommandJob"):
            assert f"eks-training:index:{t}" in types
        assert "eks-training:index:Admission" in types
        gpu_ng = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"]["eks-training/role"] == "gpu")
        assert gpu_ng.inputs["amiType"] == "AL2023_x86_64_NVIDIA", "GPU facts come from the catalog"
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in gpu_ng.inputs["taints"]
        assert gpu_ng.inputs["version"] == "1.36"  # the group follows the cluster's minor
        assert len(p.of_type("aws:ec2/subnet:Subnet")) == 4
        # the job's pods land on the GPU group: its placement selects the group's labels and tolerates its taints
        job = p.one("kubernetes:batch/v1:Job", lambda r: r.inputs["metadata"]["name"] == "hello")
        pod = job.inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"].items() <= gpu_ng.inputs["labels"].items(), (pod["nodeSelector"], gpu_ng.inputs)
        assert pod["nodeSelector"]["eks-training/role"] == "gpu"
        taints = {(t["key"], t["value"], t["effect"]) for t in gpu_ng.inputs["taints"]}
        tolerated = {(t["key"], t["value"], TAINT_EFFECTS_EKS[t["effect"]]) for t in pod["tolerations"]}
        assert tolerated == taints
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        if not preview:
            claim = pod["volumes"][0]["persistentVolumeClaim"]["claimName"]
            assert claim == p.one("kubernetes:core/v1:PersistentVolumeClaim").inputs["metadata"]["name"]
        # the queued job: created suspended in the guide's LocalQueue, after it, and the quota covers what its pod
        # requests on the flavor its node selector and tolerations select (Kueue admits it on that flavor only)
        queued = p.one("kubernetes:batch/v1:Job", lambda r: r.inputs["metadata"]["name"] == "queued")
        assert queued.inputs["spec"]["suspend"] is True
        assert queued.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobs"
        local_queue = p.one("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
        assert local_queue.inputs["metadata"]["name"] == "jobs" and local_queue.urn in queued.dependencies
        (flavor,) = p.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
        queued_pod = queued.inputs["spec"]["template"]["spec"]
        assert queued_pod["nodeSelector"].items() >= flavor.inputs["spec"]["nodeLabels"].items()
        cluster_queue = p.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue").inputs["spec"]
        quota = {r["name"]: r["nominalQuota"] for r in cluster_queue["resourceGroups"][0]["flavors"][0]["resources"]}
        requests = queued_pod["containers"][0]["resources"]["requests"]
        assert set(requests) <= set(quota), (requests, quota)
        assert quota["nvidia.com/gpu"] == "1" == requests["nvidia.com/gpu"]


def test_harness_rejects_duplicate_urns(tmp_path: Path) -> None:
    """Control: the harness's monitor fails a program that registers the same URN twice."""
    main = tmp_path / "__main__.py"
    main.write_text("import pulumi_aws as aws\naws.s3.Bucket('same-name')\naws.s3.Bucket('same-name')\n")
    p = run_program("dev", config={"aws:region": "us-east-1"}, main=main, expect_error=True)
    assert p.error is not None and "duplicate URN registered" in str(p.error) and "same-name" in str(p.error)


NODE_GROUP_PROGRAM = """
from components import TrainingNodeGroup

group = TrainingNodeGroup("decided", {
    "cluster_name": "c", "node_role_arn": "arn:aws:iam::123456789012:role/n", "subnet_ids": ["subnet-1"],
    "instance_types": ["g5.xlarge"], "role": "gpu", "min_size": 0, "desired_size": 0, "max_size": 2,
    "node_labels": {"eks-training/role": "gpu", "team": "a"},
    "node_taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    "ami_type": "AL2023_x86_64_STANDARD",
})
"""


def test_a_node_group_takes_the_labels_taints_and_ami_its_caller_decided(tmp_path: Path) -> None:
    """The stack's program passes its plan's decisions (node_labels, node_taints, ami_type) and the group registers
    them as given, adding nothing (the GPU taint and labels of a g5 are not added again)."""
    main = tmp_path / "__main__.py"
    main.write_text(NODE_GROUP_PROGRAM)
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main)
    ng = p.one("aws:eks/nodeGroup:NodeGroup")
    assert ng.inputs["labels"] == {"eks-training/role": "gpu", "team": "a"}
    assert ng.inputs["taints"] == [{"key": "dedicated", "value": "a", "effect": "NO_SCHEDULE"}]
    assert ng.inputs["amiType"] == "AL2023_x86_64_STANDARD"


def test_a_node_group_reports_the_release_it_runs_as_eks_does(tmp_path: Path) -> None:
    """A group that asks for no version nor release runs, under the mocks as at EKS, the cluster's minor (here the
    default) at the newest release: its ``release_version`` output holds it in EKS's form (``1.36.2-20260714``)."""
    main = tmp_path / "__main__.py"
    main.write_text(NODE_GROUP_PROGRAM + 'import pulumi\npulumi.export("release", group.release_version)\n')
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main)
    assert "releaseVersion" not in p.one("aws:eks/nodeGroup:NodeGroup").inputs
    assert p.outputs["release"] == release_version(None, DEFAULT_KUBERNETES_VERSION)
    assert RELEASE_VERSION_RE.match(p.outputs["release"]), p.outputs["release"]


@pytest.mark.parametrize(
    "change, message",
    [
        ('"ami_type": "AL2023_x86_64_STANDARD",', "node_labels and node_taints are decided together"),
        ('"node_taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],', "decided together"),
    ],
)
def test_decided_labels_and_taints_go_together(tmp_path: Path, change: str, message: str) -> None:
    """Half a decision is refused (a group with decided labels but derived taints would lose the GPU taint)."""
    main = tmp_path / "__main__.py"
    program = NODE_GROUP_PROGRAM.replace(
        '"node_taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],\n', ""
    )
    if "node_taints" in change:  # drop node_labels instead
        program = NODE_GROUP_PROGRAM.replace('"node_labels": {"eks-training/role": "gpu", "team": "a"},\n', "")
    main.write_text(program)
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main, expect_error=True)
    assert p.error is not None and message in str(p.error)


def test_decided_labels_exclude_extra_labels(tmp_path: Path) -> None:
    main = tmp_path / "__main__.py"
    main.write_text(NODE_GROUP_PROGRAM.replace('"ami_type"', '"labels": {"x": "y"}, "ami_type"'))
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main, expect_error=True)
    assert p.error is not None and "either node_labels (all of them) or labels" in str(p.error)


OTHER_TYPE_PROGRAM = """
from components import TrainingNodeGroup

group = TrainingNodeGroup("other", {
    "cluster_name": "c", "node_role_arn": "arn:aws:iam::123456789012:role/n", "subnet_ids": ["subnet-1"],
    "instance_types": ["g9.2xlarge"], "role": "gpu", "min_size": 0, "desired_size": 0, "max_size": 2, EXTRA
})
"""


@pytest.mark.parametrize(
    "extra, message",
    [
        ("", "instance type 'g9.2xlarge' is not in the catalog; pass gpus_per_node and, for a GPU type, accelerator"),
        ('"gpus_per_node": 1', "instance type 'g9.2xlarge' is not in the catalog; pass gpus_per_node and, for a GPU"),
    ],
)
def test_a_gpu_type_outside_the_catalog_needs_its_gpus_and_accelerator(tmp_path: Path, extra: str, message: str):
    """The group's accelerator label is what a job's placement selects (node_profile's, from the caller's
    InstanceType): the group cannot derive it for a type it has no facts of, and "nvidia" would match no job."""
    main = tmp_path / "__main__.py"
    main.write_text(OTHER_TYPE_PROGRAM.replace("EXTRA", extra))
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main, expect_error=True)
    assert p.error is not None and message in str(p.error), p.error
    assert not p.of_type("aws:eks/nodeGroup:NodeGroup")


@pytest.mark.parametrize(
    "extra, labels",
    [
        ('"gpus_per_node": 1, "accelerator": "nvidia-b300"', {"k8s.amazonaws.com/accelerator": "nvidia-b300"}),
        ('"gpus_per_node": 0', {}),  # a CPU type: no accelerator label
    ],
)
def test_a_type_outside_the_catalog_registers_with_what_it_was_given(tmp_path: Path, extra: str, labels) -> None:
    main = tmp_path / "__main__.py"
    main.write_text(OTHER_TYPE_PROGRAM.replace("EXTRA", extra))
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main)
    got = p.one("aws:eks/nodeGroup:NodeGroup").inputs["labels"]
    assert {k: v for k, v in got.items() if k == "k8s.amazonaws.com/accelerator"} == labels, got


@pytest.mark.parametrize("stack", stack_names())
def test_every_stack_registers_its_plans_node_labels_and_taints(stack: str) -> None:
    """What the program registers for each worker group is what the plan decided (one derivation, read by the
    report, the admission flavors and the node groups alike)."""
    plan = build_plan(load_config(PROJECT, stack, stack_config(stack)))
    program = run_program(stack)
    for g in plan.groups.values():
        ng = program.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"].get(NODE_ROLE_LABEL) == g.name)
        assert ng.inputs["labels"] == dict(g.profile.labels), (stack, g.name)
        assert ng.inputs["taints"] == [{**t, "effect": TAINT_EFFECTS_EKS[t["effect"]]} for t in g.profile.taints], (
            stack,
            g.name,
        )
        assert ng.inputs["amiType"] == g.profile.ami_type, (stack, g.name)


MPI_OPERATOR_PROGRAM = """
import pulumi_kubernetes as k8s
from components import MpiOperator

provider = k8s.Provider("k", kubeconfig="{}")
MpiOperator("mpi", ARGS, opts=__import__("pulumi").ResourceOptions(provider=provider))
"""


@pytest.mark.parametrize(
    "args, selector",
    [
        ("{}", {"eks-training/role": "system"}),
        ('{"node_selector": {"pool": "ops"}}', {"pool": "ops"}),
        ('{"node_selector": {}}', None),
    ],
)
def test_the_mpi_operator_runs_where_its_caller_says(tmp_path: Path, args: str, selector) -> None:
    """The release manifest's Deployment is patched onto the system nodes by default, onto the caller's nodes when
    given, and left alone for ``{}``."""
    main = tmp_path / "__main__.py"
    main.write_text(MPI_OPERATOR_PROGRAM.replace("ARGS", args))
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main)
    patches = p.of_type("kubernetes:apps/v1:DeploymentPatch")
    if selector is None:
        assert not patches
        return
    (patch,) = patches
    assert patch.inputs["spec"] == {"template": {"spec": {"nodeSelector": selector}}}
    assert patch.inputs["metadata"]["annotations"] == {"pulumi.com/patchFieldManager": "mpi-placement"}
    assert [d.rpartition("::")[2] for d in patch.dependencies] == ["mpi-manifest"]


ADMISSION_PROGRAM = """
import pulumi, pulumi_kubernetes as k8s
from components import Admission

args = {
    "namespace": "training", "local_queue": "jobs", "cluster_queue": "research",
    "flavors": [{"name": "gpu", "node_labels": {"eks-training/role": "gpu"}, "node_taints": [],
                 "quota": {"cpu": "16", "memory": "64Gi"}}],
    "resources": ["cpu", "memory"], "priorities": {"training": 100}, "queueing_strategy": "BestEffortFIFO",
    "pods_ready_timeout_s": 1200, "requeue_backoff_base_s": 60, "requeue_backoff_max_s": 600,
    "node_selector": {"eks-training/role": "system"},
}
CHANGE
Admission("kueue", args, opts=pulumi.ResourceOptions(provider=k8s.Provider("k", kubeconfig="{}")))
"""


@pytest.mark.parametrize(
    "change, message",
    [
        ("", None),
        ('args["resources"].append("nvidia.com/gpu")', "flavors[0].quota: no quota of nvidia.com/gpu"),
        ('args["flavors"][0]["quota"]["gpu"] = "1"', "flavors[0].quota: gpu not among resources"),
        ('args["flavors"].append(dict(args["flavors"][0]))', "flavors: 'gpu' twice"),
        ('args["flavors"] = []', "flavors: empty"),
        ('args["queueing_strategy"] = "FIFO"', "queueing_strategy: 'FIFO'; use BestEffortFIFO or StrictFIFO"),
        ('args["flavors"][0]["topology_name"] = "net"', "flavors[0].topology_name: 'net' is not in topologies"),
        ('args["pods_ready_timeout_s"] = 0', "pods_ready_timeout_s: 0; give a number of seconds above 0"),
        ('args["local_queue"] = "Jobs_A"', "local_queue: 'Jobs_A' is not a Kubernetes object name"),
        (
            'args["flavors"][0]["node_taints"] = [{"key": "k", "value": "v", "effect": "NO_SCHEDULE"}]',
            "flavors[0].node_taints[0].effect: 'NO_SCHEDULE'; use one of NoSchedule",
        ),
        ('args["own_quota"] = {"gpu": {"cpu": "1", "memory": "1Gi"}}', "own_quota: given without cohort"),
        ('args["local_queues"] = "jobs"', "local_queues: not a key of AdmissionArgs; did you mean local_queue?"),
        (
            'args["provisioning"] = {"check": "c", "config": "c", "provisioning_class": "p", "flavors": ["cpu"], '
            '"backoff_base_s": 60, "backoff_max_s": 600, "backoff_limit_count": 3}',
            "provisioning.flavors: 'cpu' is not a flavor; name one of gpu",
        ),
    ],
)
def test_admission_refuses_queues_kueue_would_never_admit_before_it_registers(
    tmp_path: Path, change: str, message
) -> None:
    """Names that do not match (a quota without one of the resources, a topology or a checked flavor that does not
    exist) would leave the ClusterQueue inactive or every job waiting: refused, naming the key, with nothing made."""
    main = tmp_path / "__main__.py"
    main.write_text(ADMISSION_PROGRAM.replace("CHANGE", change))
    p = run_program("dev", config={"aws:region": "us-west-2"}, main=main, expect_error=message is not None)
    if message is None:
        assert p.error is None and p.one("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
        return
    assert p.error is not None and f"Admission('kueue').args.{message}" in str(p.error), p.error
    assert not [r for r in p.registrations if r.type != "pulumi:providers:kubernetes"], "registered before the check"
