"""Every container the stacks run (containers and init containers of every pod template of our Deployments,
StatefulSets, DaemonSets, Jobs and MPIJobs) is pinned, unprivileged and, unless it must write to its image,
read-only. Third-party software the program installs as a whole (the Helm releases: device plugins,
cluster-autoscaler, Kueue; the MPI Operator's release manifest) is configured by its vendor's chart or manifest; of
the Helm releases, the images their values name are checked (pinned by digest, or listed with the reason)."""

import functools
import re
from typing import Any, Iterator

import pytest

from components.catalog import CHART_IMAGES, CLUSTER_AUTOSCALER, HELM_CHARTS
from components.conventions import IMAGE_PULL_POLICY
from components.device_plugins import nvidia_device_plugin_values
from stacks.config import load_config
from stacks.plan import Plan, build_plan
from tests.harness import PROJECT, Program, Registration, contains_unknown, run_program, stack_config, stack_names
from tests.netpol import pod_templates

STACKS = stack_names()
DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
TEMPLATE_TYPES = (
    "kubernetes:apps/v1:Deployment",
    "kubernetes:apps/v1:StatefulSet",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:Job",
    "kubernetes:kubeflow.org/v2beta1:MPIJob",
)
#: Containers of the project's own helpers: read-only whatever the job says.
HELPERS = (
    "wait-for-jobs",
    "wait-for-workers",
    "fetch-code",
    "output-folder",
    "etcd",
    "stage",
    "tensorboard",
    "chown",
    "collect",
    "prepull",
    "hold",
)
#: The one container that runs as root, and why: a new FSx for Lustre file system belongs to root, and only root
#: with CHOWN and FOWNER (no other capability, read-only root, no escalation) can hand its directories to the
#: training user. (object name suffix, container) -> the capabilities it adds.
ROOT_CONTAINERS = {("-fsx-volume-init", "chown"): ["CHOWN", "FOWNER"]}


def containers(p: Program) -> Iterator[tuple[Registration, str, dict[str, Any], dict[str, Any]]]:
    """``(object, role, pod spec, container)`` for every container and init container."""
    for r in p.registrations:
        if r.type not in TEMPLATE_TYPES:
            continue
        for role, template, _ in pod_templates(r.inputs):
            pod = template["spec"]
            for c in [*(pod.get("initContainers") or []), *pod["containers"]]:
                yield r, role, pod, c


def test_every_kind_that_runs_pods_is_covered() -> None:
    """Control: the stacks register each kind this test reads, and nothing else that runs pods."""
    kinds = {r.type for s in STACKS for r in run_program(s).registrations}
    assert {
        "kubernetes:apps/v1:Deployment",
        "kubernetes:batch/v1:Job",
        "kubernetes:kubeflow.org/v2beta1:MPIJob",
    } <= kinds
    runs_pods = {k for k in kinds if k.rsplit(":", 1)[-1] in ("Pod", "ReplicaSet", "CronJob", "ReplicationController")}
    assert not runs_pods


@pytest.mark.parametrize("preview", [False, True])
@pytest.mark.parametrize("stack", STACKS)
def test_every_image_is_pinned_by_digest_or_built_by_the_stack(program_for, stack: str, preview: bool) -> None:
    p: Program = program_for(stack, preview)
    builds = {b.urn for b in p.of_type("pulumi-python:dynamic/eks-training:ImageBuild")}
    built_uris = {b.outputs.get("image_uri") for b in p.of_type("pulumi-python:dynamic/eks-training:ImageBuild")}
    seen = 0
    for r, _, _, c in containers(p):
        seen += 1
        image = c["image"]
        if contains_unknown(image):
            assert preview, f"{r.name}: an unknown image outside a preview"
            assert builds & set(r.dependencies + [u for d in r.property_dependencies.values() for u in d]), (
                f"{r.name}/{c['name']}: an image unknown at preview comes from a build of this stack"
            )
            continue
        assert DIGEST.match(image), f"{r.name}/{c['name']}: {image} is not pinned by digest"
        if not preview and "dkr.ecr" in image:
            assert image in built_uris, f"{r.name}/{c['name']}: {image} is not one this stack built"
        assert c["imagePullPolicy"] == IMAGE_PULL_POLICY, f"{r.name}/{c['name']}"
    assert seen


#: Helm releases (by chart name) whose controller image is still named by tag, and why. Every other release's values
#: name its image, pinned by digest (the catalog's CHART_IMAGES, and CLUSTER_AUTOSCALER per Kubernetes minor).
HELM_IMAGES_BY_TAG = {
    "aws-efa-k8s-device-plugin": "the chart's default image, 602401143452.dkr.ecr.<region>.amazonaws.com/eks/"
    "aws-efa-k8s-device-plugin at the chart's tag: no public source publishes its digest (EKS's ECR account needs "
    "AWS credentials to read, the plugin's code is not public, and aws/eks-charts and AWS's documentation name the "
    "image by tag only: aws-samples/aws-efa-eks#26), so a digest pinned here could not be checked against one",
}


def test_only_charts_without_a_catalogued_digest_run_by_tag() -> None:
    """An exemption ends with the digest: a chart the catalog pins (CHART_IMAGES, cluster-autoscaler) is checked."""
    pinned = {HELM_CHARTS[key].chart for key in CHART_IMAGES} | {r.chart.chart for r in CLUSTER_AUTOSCALER.values()}
    assert {"kueue", "nvidia-device-plugin", "cluster-autoscaler"} <= pinned
    assert not pinned & set(HELM_IMAGES_BY_TAG), pinned & set(HELM_IMAGES_BY_TAG)


def test_the_nvidia_plugin_runs_its_charts_release_by_digest() -> None:
    """The nvidia-device-plugin chart writes ``repository:tag``: its values carry the catalog's digest in the tag, and
    another chart version (whose default image is another release) is refused rather than run with this image."""
    chart = HELM_CHARTS["nvidia-device-plugin"]
    image = nvidia_device_plugin_values(chart.version)["image"]
    assert f"{image['repository']}:{image['tag']}" == CHART_IMAGES["nvidia-device-plugin"].ref
    assert image["tag"].startswith(f"v{chart.version}@sha256:"), image
    with pytest.raises(ValueError, match="is not the chart 0.19.0's release"):
        nvidia_device_plugin_values("0.19.0")


def _image_values(values: Any) -> Iterator[str]:
    """Every image a chart's values name: ``{repository, tag}`` maps (rendered ``repository:tag``) and ``image``
    strings."""
    if isinstance(values, dict):
        if isinstance(values.get("repository"), str) and "tag" in values:
            yield f"{values['repository']}:{values['tag']}"
        for k, v in values.items():
            if k == "image" and isinstance(v, str):
                yield v
            else:
                yield from _image_values(v)
    elif isinstance(values, list):
        for v in values:
            yield from _image_values(v)


@pytest.mark.parametrize("stack", STACKS)
def test_every_helm_releases_image_is_pinned_by_digest(program_for, stack: str) -> None:
    """The images the Helm releases run (Kueue's controller...) as their values name them, rendered the way the
    charts' templates write ``repository:tag``: pinned by digest, except the releases :data:`HELM_IMAGES_BY_TAG`
    names with the reason."""
    p: Program = program_for(stack, False)
    releases = [r for r in p.registrations if r.type == "kubernetes:helm.sh/v3:Release"]
    charts = set()
    for r in releases:
        chart = str(r.inputs["chart"]).rsplit("/", 1)[-1]
        charts.add(chart)
        if chart in HELM_IMAGES_BY_TAG:
            continue
        images = list(_image_values(r.inputs.get("values") or {}))
        assert images, f"{r.name}: chart {chart} runs its default image (by tag): name it, pinned by digest"
        for image in images:
            assert DIGEST.match(image), f"{r.name}: {image} is not pinned by digest"
    assert {"kueue", "cluster-autoscaler"} <= charts, sorted(charts)


@functools.cache
def _plan(stack: str) -> Plan:
    return build_plan(load_config(PROJECT, stack, stack_config(stack)))


def _expected_read_only(stack: str, r: Registration, c: dict[str, Any]) -> bool:
    if c["name"] in HELPERS or r.name.endswith("-allreduce-job"):  # a job's all-reduce health check
        return True
    jobs = _plan(stack).jobs  # the stack's jobs and its benchmark's experiments
    name = next(n for n in jobs if r.name.endswith((f"-{n}-job", f"-{n}-mpijob")))
    return jobs[name].read_only_root_filesystem


@pytest.mark.parametrize("stack", STACKS)
def test_every_container_runs_unprivileged(program_for, stack: str) -> None:
    p: Program = program_for(stack, False)
    for r, role, pod, c in containers(p):
        where = f"{r.name}/{role}/{c['name']}"
        ctx = c["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False, where
        root = next(
            (caps for (suffix, name), caps in ROOT_CONTAINERS.items() if r.name.endswith(suffix) and c["name"] == name),
            None,
        )
        if root is not None:
            assert ctx["capabilities"] == {"drop": ["ALL"], "add": root}, where
            assert ctx["readOnlyRootFilesystem"] is True and not ctx.get("privileged"), where
            assert pod["securityContext"]["runAsUser"] == 0 and not pod.get("hostNetwork"), where
            assert pod.get("automountServiceAccountToken") is False, where
            continue
        assert ctx["capabilities"] == {"drop": ["ALL"]}, where
        assert not ctx.get("privileged"), where
        pod_ctx = pod["securityContext"]
        assert pod_ctx["runAsNonRoot"] is True and pod_ctx["runAsUser"] > 0 and pod_ctx["runAsGroup"] > 0, where
        assert pod_ctx["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), where


@pytest.mark.parametrize("stack", STACKS)
def test_root_file_systems_are_read_only_with_writable_scratch(program_for, stack: str) -> None:
    p: Program = program_for(stack, False)
    checked = 0
    for r, role, pod, c in containers(p):
        where = f"{r.name}/{role}/{c['name']}"
        read_only = c["securityContext"]["readOnlyRootFilesystem"]
        assert read_only is _expected_read_only(stack, r, c), where
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        assert len(volumes) == len(pod.get("volumes") or []), f"{where}: volume names repeat"
        mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
        for m in mounts.values():
            assert m["name"] in volumes, f"{where}: mounts {m['name']}, which the pod lacks"
        if not read_only:
            continue
        checked += 1
        env = {e["name"]: e.get("value") for e in c.get("env") or []}
        writable = [path for path, m in mounts.items() if not m.get("readOnly") and "emptyDir" in volumes[m["name"]]]
        if "HOME" in env:
            assert any(env["HOME"] == w or env["HOME"].startswith(w + "/") for w in writable), (
                f"{where}: HOME is not writable"
            )
        if c["name"] in ("worker", "launcher", "fetch-code", "stage", "tensorboard"):
            assert "/tmp" in writable, f"{where}: no writable /tmp"
        if c["name"] == "etcd":
            # its data folder is on a writable volume: the shared claim (it survives etcd's rescheduling)
            data = next(a.split("=", 1)[1] for a in c["args"] if a.startswith("--data-dir="))
            persistent = [
                path
                for path, m in mounts.items()
                if not m.get("readOnly") and "persistentVolumeClaim" in volumes[m["name"]]
            ]
            assert any(data.startswith(p + "/") for p in persistent), (
                f"{where}: etcd's data folder is not on the shared claim"
            )
    assert checked


def _mpi_stack(read_only: Any) -> Program:
    cfg = stack_config("mpi-horovod")
    if read_only is not None:
        cfg[f"{PROJECT}:jobs"]["nccl"]["readOnlyRootFilesystem"] = read_only
    return run_program("mpi-horovod", config=cfg)


def test_mpi_jobs_default_to_a_writable_root_and_can_opt_in() -> None:
    def templates(p: Program) -> dict[str, dict[str, Any]]:
        mpi = p.one("kubernetes:kubeflow.org/v2beta1:MPIJob", lambda r: r.name.endswith("-nccl-mpijob"))
        return {role: t["spec"] for role, t, _ in pod_templates(mpi.inputs)}

    for role, pod in templates(_mpi_stack(None)).items():
        (c,) = pod["containers"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is False, role
        assert "tmp" not in {v["name"] for v in pod["volumes"]}
    for role, pod in templates(_mpi_stack(True)).items():
        (c,) = pod["containers"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True, role
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
        assert {"name": "tmp", "emptyDir": {"sizeLimit": "8Gi"}} in pod["volumes"]


def test_a_job_can_opt_out_of_the_read_only_root() -> None:
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:jobs"]["evaluate"]["readOnlyRootFilesystem"] = False
    p = run_program("workshop", config=cfg)
    job = p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith("-evaluate-job"))
    pod = job.inputs["spec"]["template"]["spec"]
    main = next(c for c in pod["containers"] if c["name"] == "worker")
    assert main["securityContext"]["readOnlyRootFilesystem"] is False
    assert "/tmp" not in {m["mountPath"] for m in main["volumeMounts"]}
    helpers = pod["initContainers"]  # wait-for-jobs, output-folder
    assert helpers and all(c["securityContext"]["readOnlyRootFilesystem"] is True for c in helpers), "helpers stay"
    train = p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith("-train-job"))
    (tc,) = train.inputs["spec"]["template"]["spec"]["containers"]
    assert tc["securityContext"]["readOnlyRootFilesystem"] is True, "other jobs keep the default"


def test_read_only_root_filesystem_must_be_a_boolean() -> None:
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:jobs"]["evaluate"]["readOnlyRootFilesystem"] = "sometimes"
    p = run_program("workshop", config=cfg, expect_error=True)
    assert p.error is not None and "readOnlyRootFilesystem" in str(p.error)
    assert not p.registrations
