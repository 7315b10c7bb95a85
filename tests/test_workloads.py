"""The training workloads as registered by the real program, for every stack that trains."""

import shutil
from pathlib import Path
from typing import Any

import pytest

import stacks.workloads
from components.catalog import IMAGES, INSTANCE_TYPES
from components.scheduling import NODE_ROLE_LABEL
from tests.harness import PROJECT, Program, Registration, contains_unknown, run_program, stack_config, stack_names

pytestmark = pytest.mark.mock

TRAINING_STACKS = [s for s in stack_names() if stack_config(s).get(f"{PROJECT}:training")]
MODES = [False, True]


def test_every_shipped_stack_trains() -> None:
    assert TRAINING_STACKS == stack_names()


def _training_cfg(stack: str) -> dict[str, Any]:
    return dict(stack_config(stack)[f"{PROJECT}:training"])


def _job(p: Program, suffix: str) -> Registration:
    return p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith(suffix))


def _pod(job: Registration) -> dict[str, Any]:
    return job.inputs["spec"]["template"]["spec"]


def _container(job: Registration) -> dict[str, Any]:
    (c,) = _pod(job)["containers"]
    return c


@pytest.mark.parametrize("preview", MODES)
@pytest.mark.parametrize("stack", TRAINING_STACKS)
class TestWorkloads:
    def test_image_is_built_and_referenced_by_digest(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        repo = p.one("aws:ecr/repository:Repository")
        assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
        assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
        assert repo.inputs["encryptionConfigurations"][0]["encryptionType"] in ("AES256", "KMS")
        build = p.one("pulumi-python:dynamic/eks-training:ImageBuild")
        # the workloads' jobs (FSx stacks also run the storage's one-shot volume-permissions Job)
        jobs = [j for j in p.of_type("kubernetes:batch/v1:Job") if not j.name.endswith("-volume-init")]
        assert len(jobs) == 4  # staging, all-reduce health check, training, evaluation
        for job in jobs:
            image = _container(job)["image"]
            assert build.urn in job.deps_of("spec"), f"{job.name} must use the built image"
            if preview:
                assert contains_unknown(image), "the digest is unknown until the build ran"
            else:
                assert "@sha256:" in image and image == build.outputs["image_uri"]

    def test_etcd_rendezvous_service(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        dep = p.one("kubernetes:apps/v1:Deployment")
        svc = p.one("kubernetes:core/v1:Service", lambda r: r.inputs["spec"].get("type") == "ClusterIP")
        pod = dep.inputs["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["image"] == IMAGES["etcd"] and ":v3.5." in c["image"]
        assert "--enable-v2=true" in c["args"]
        assert c["readinessProbe"]["httpGet"]["path"] == "/health"
        assert c["resources"]["requests"] and c["resources"]["limits"]
        assert pod["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
        assert svc.inputs["spec"]["ports"][0]["port"] == 2379
        assert svc.inputs["spec"]["selector"] == dep.inputs["spec"]["selector"]["matchLabels"]
        train = _job(p, "-train-job")
        if not preview:
            cmd = _container(train)["command"]
            ns = svc.inputs["metadata"]["namespace"]
            assert f"--rdzv-endpoint={svc.inputs['metadata']['name']}.{ns}.svc.cluster.local:2379" in cmd
            assert "--rdzv-backend=etcd-v2" in cmd
        assert svc.urn in train.deps_of("spec")

    def test_training_job_spec(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        t = _training_cfg(stack)
        group = stack_config(stack)[f"{PROJECT}:nodeGroups"][t["nodeGroup"]]
        facts = INSTANCE_TYPES[group["instanceTypes"][0]]
        job = _job(p, "-train-job")
        spec = job.inputs["spec"]
        pod = _pod(job)
        c = _container(job)
        assert spec["completionMode"] == "Indexed"
        assert spec["completions"] == spec["parallelism"] == t["workers"]
        assert pod["restartPolicy"] == "Never"
        rules = spec["podFailurePolicy"]["rules"]
        assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules
        # one pod per node, on the configured group, tolerating exactly its taints
        (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti["topologyKey"] == "kubernetes.io/hostname"
        assert pod["nodeSelector"][NODE_ROLE_LABEL] == t["nodeGroup"]
        ng = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"][NODE_ROLE_LABEL] == t["nodeGroup"])
        selector = dict(pod["nodeSelector"])
        zone = selector.pop("topology.kubernetes.io/zone", None)
        assert zone == group.get("availabilityZone"), "pods of a pinned (EFA) group land in its zone"
        for k, v in selector.items():
            assert ng.inputs["labels"][k] == v
        effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
        assert sorted((x["key"], x["value"], x["effect"]) for x in pod["tolerations"]) == sorted(
            (x["key"], x["value"], effect[x["effect"]]) for x in (ng.inputs.get("taints") or [])
        )
        # resources from the catalog row of the group's instance type
        requests, limits = c["resources"]["requests"], c["resources"]["limits"]
        if facts.gpus:
            assert requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"] == str(facts.gpus)
        else:
            assert "nvidia.com/gpu" not in requests
        cpu_m = int(requests["cpu"].rstrip("m"))
        assert 0.5 * facts.vcpus * 1000 <= cpu_m <= facts.vcpus * 1000
        # volumes: shared PVC and memory-backed /dev/shm
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in pod["volumes"]}
        assert vols[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
        pvc = p.one("kubernetes:core/v1:PersistentVolumeClaim")
        assert "persistentVolumeClaim" in vols[mounts["/data"]]
        assert pvc.urn in job.deps_of("spec")
        env = {e["name"]: e["value"] for e in c["env"]}
        assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
        svc = p.one("kubernetes:core/v1:Service", lambda r: r.name.endswith("-train-service"))
        assert svc.inputs["spec"]["clusterIP"] == "None"
        assert pod["subdomain"] == svc.inputs["metadata"]["name"], "stable hostnames via the headless Service"
        if not preview:
            cmd = c["command"]
            # launch.py (no-op when the run is DONE; resets a closed rendezvous) execs torchrun
            assert cmd[:2] == ["python", "/app/launch.py"]
            launcher, cmd = cmd[: cmd.index("--")], cmd[cmd.index("--") + 1 :]
            assert cmd[0] == "torchrun"
            rdzv = [x for x in cmd if x.startswith("--rdzv-id=")]
            assert rdzv == [f"--rdzv-id={launcher[launcher.index('--rdzv-id') + 1]}"]
            assert launcher[launcher.index("--output-dir") + 1] == cmd[cmd.index("--output-dir") + 1]
            nnodes = f"--nnodes={t.get('minWorkers', 1)}:{t.get('maxWorkers', group['maxSize'])}"
            assert nnodes in cmd
            assert f"--nproc-per-node={max(1, facts.gpus)}" in cmd
            assert "/app/train.py" in cmd
            assert cmd[cmd.index("--epochs") + 1] == str(t.get("epochs", 10))
            assert cmd[cmd.index("--output-dir") + 1].startswith("/data/runs/")

    def test_ordering_staging_training_evaluation(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        stage, train, evaluate = _job(p, "-stage-job"), _job(p, "-train-job"), _job(p, "-eval-job")
        assert stage.urn in train.dependencies, "training starts after the data is staged"
        assert train.urn in evaluate.dependencies, "evaluation is created after the training Job"
        # Pulumi waits for the staging Job to complete; training and evaluation don't block `pulumi up`.
        assert "pulumi.com/skipAwait" not in (stage.inputs["metadata"].get("annotations") or {})
        assert train.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        (init,) = _pod(evaluate)["initContainers"]
        if not preview:
            out_dir = _container(train)["command"][_container(train)["command"].index("--output-dir") + 1]
            assert f"{out_dir}/DONE" in init["command"][-1], "evaluation waits for the run's DONE marker"
            ev = _container(evaluate)["command"]
            assert ev[ev.index("--model") + 1] == f"{out_dir}/model.pt"
            assert ev[ev.index("--output-json") + 1] == f"{out_dir}/evaluation.json"
            st = _container(stage)["command"]
            data_dir = st[st.index("--dest") + 1]
            tc = _container(train)["command"]
            assert tc[tc.index("--data-dir") + 1] == data_dir == ev[ev.index("--data-dir") + 1]
            assert "--md5" in st

    def test_kubernetes_objects_go_before_the_cluster_and_no_load_balancer(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        cluster = p.one("eks:index:Cluster")
        for r in p.registrations:
            if r.type.startswith("kubernetes:"):
                assert p.depends_transitively(r, cluster.urn), f"{r.name} must be deleted before the cluster"
            if r.type == "kubernetes:core/v1:Service":
                assert r.inputs["spec"].get("type", "ClusterIP") != "LoadBalancer"

    def test_outputs(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for key in ("imageUri", "trainingJobName", "evaluationJobName", "stagingJobName", "followTrainingLogsCommand", "evaluationResultCommand"):
            assert key in p.outputs
        if preview:
            return
        from tests.harness import resolve

        assert "@sha256:" in resolve(p.outputs["imageUri"])
        follow = resolve(p.outputs["followTrainingLogsCommand"])
        assert follow.startswith("kubectl logs -n training -f") and resolve(p.outputs["trainingJobName"]) in follow
        assert resolve(p.outputs["evaluationJobName"]) in resolve(p.outputs["evaluationResultCommand"])


def _fingerprints(p: Program) -> dict[str, str]:
    import json

    def plain(o: Any) -> str:
        return f"{type(o).__name__}:{getattr(o, 'path', o)}"

    return {r.urn: json.dumps(r.inputs, sort_keys=True, default=plain) for r in p.registrations}


def test_changed_training_source_rebuilds_only_the_image_and_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = tmp_path / "training"
    shutil.copytree(stacks.workloads.TRAINING_CONTEXT, context, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(stacks.workloads, "TRAINING_CONTEXT", context)
    before = _fingerprints(run_program("workshop"))
    same = _fingerprints(run_program("workshop"))
    assert before == same, "an unchanged context registers identical inputs (no rebuild)"
    (context / "train.py").write_text((context / "train.py").read_text() + "\n# a change\n")
    after = _fingerprints(run_program("workshop"))
    assert before.keys() == after.keys()
    changed = {urn.rsplit("::", 1)[1] for urn in before if before[urn] != after[urn]}
    assert changed == {
        "eks-training-workshop-image-context",
        "eks-training-workshop-image-image",
        "eks-training-workshop-stage-job",
        "eks-training-workshop-allreduce-job",
        "eks-training-workshop-train-job",
        "eks-training-workshop-eval-job",
    }, changed


def test_resizing_keeps_the_run() -> None:
    """A new worker count replaces the training Job (pulumi-kubernetes replaces Jobs whose size or
    template changes; delete-before-replace, same name), and the new pods continue the same run."""
    cfg = stack_config("workshop")
    before = run_program("workshop", config=cfg)
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:nodeGroups"]["cpu"].update(maxSize=4, desiredSize=3)
    cfg[f"{PROJECT}:training"].update(workers=3, maxWorkers=4)
    resized = run_program("workshop", config=cfg)
    a, b = _job(before, "-train-job"), _job(resized, "-train-job")
    assert a.urn == b.urn and a.inputs["metadata"]["name"] == b.inputs["metadata"]["name"]
    assert a.inputs["spec"]["completions"] == 2
    assert (b.inputs["spec"]["completions"], b.inputs["spec"]["parallelism"]) == (3, 3)
    cmd_a, cmd_b = _container(a)["command"], _container(b)["command"]
    # the run id and output folder stay (the resized job resumes the same run); only MAX changes
    assert cmd_a[cmd_a.index("--output-dir") + 1] == cmd_b[cmd_b.index("--output-dir") + 1]
    assert [x for x in cmd_b if x.startswith("--rdzv-id")] == [x for x in cmd_a if x.startswith("--rdzv-id")]


def test_prebuilt_image_skips_the_build() -> None:
    ref = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.7.0-gpu-py312-cu128-ubuntu22.04-ec2"
    cfg = stack_config("g5")
    cfg[f"{PROJECT}:image"] = {"prebuilt": ref}
    p = run_program("g5", config=cfg)
    assert not p.of_type("eks-training:index:TrainingImage")
    assert not p.of_type("aws:codebuild/project:Project")
    for job in p.of_type("kubernetes:batch/v1:Job"):
        assert _container(job)["image"] == ref


def test_s3_dataset_gets_a_read_only_pod_identity_role() -> None:
    import json

    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:dataset"] = {"source": "s3://ml-datasets-example/cifar/cifar-10-python.tar.gz", "md5": "c58f30108f718f92721af3b95e74349a"}
    p = run_program("workshop", config=cfg)
    assoc = p.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", lambda r: "-stage-" in r.name)
    sa = p.one("kubernetes:core/v1:ServiceAccount")
    assert assoc.inputs["serviceAccount"] == sa.inputs["metadata"]["name"]
    assert assoc.inputs["namespace"] == "training"
    policy = json.loads(p.one("aws:iam/rolePolicy:RolePolicy", lambda r: "stage" in r.name).inputs["policy"])
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": "arn:aws:s3:::ml-datasets-example/cifar/cifar-10-python.tar.gz"}
    ]
    stage = _job(p, "-stage-job")
    assert _pod(stage)["serviceAccountName"] == sa.inputs["metadata"]["name"]
    assert assoc.urn in stage.dependencies


def test_c10d_backend_needs_no_etcd() -> None:
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:training"]["rendezvousBackend"] = "c10d"
    p = run_program("workshop", config=cfg)
    assert not p.of_type("kubernetes:apps/v1:Deployment")
    train = _job(p, "-train-job")
    cmd = _container(train)["command"]
    svc = p.one("kubernetes:core/v1:Service", lambda r: r.name.endswith("-train-service"))
    job_name = train.inputs["metadata"]["name"]
    assert f"--rdzv-endpoint={job_name}-0.{svc.inputs['metadata']['name']}.training.svc.cluster.local:29400" in cmd
    assert "--rdzv-backend=c10d" in cmd


def test_gpu_pods_request_the_nodes_gpus() -> None:
    cfg = stack_config("g5")
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(instanceTypes=["g5.48xlarge"], efa=False)
    p = run_program("g5", config=cfg)
    c = _container(_job(p, "-train-job"))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "--nproc-per-node=8" in c["command"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["OMP_NUM_THREADS"] == str(int(191450 * 0.8) // 100 * 100 // 1000 // 8)


@pytest.mark.parametrize("stack", TRAINING_STACKS)
def test_the_launcher_accepts_the_generated_command(program_for, stack: str) -> None:
    """The pod command the program generates passes launch.py's own consistency checks (same run
    id, backend, endpoint and output folder for the launcher and for torchrun/train.py), and every
    script a Job runs is in the image."""
    import sys

    from tests.harness import REPO

    sys.path.insert(0, str(REPO / "training"))
    try:
        import launch
    finally:
        sys.path.remove(str(REPO / "training"))
    p = program_for(stack, False)
    cmd = _container(_job(p, "-train-job"))["command"]
    args = launch.parse_args(cmd[2:])
    launch.check_consistency(args)
    dockerfile = (REPO / "training" / "Dockerfile").read_text()
    dockerignore = (REPO / "training" / ".dockerignore").read_text().split()
    for job in p.of_type("kubernetes:batch/v1:Job"):
        for c in _pod(job).get("initContainers", []) + _pod(job)["containers"]:
            for script in (x for x in c["command"] if x.startswith("/app/")):
                name = script[len("/app/") :]
                assert name in dockerfile and f"!{name}" in dockerignore, f"{name} is not copied into the image"
