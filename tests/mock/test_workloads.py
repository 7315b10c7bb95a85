"""The workloads as registered by the real program: every stack's jobs, and each job kind in detail."""

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import stacks.bundle
import stacks.plan
from components.catalog import DEFAULT_KUBERNETES_VERSION, IMAGES, INSTANCE_TYPES, MANIFESTS
from components.quantities import millicores_of
from components.scheduling import NODE_ROLE_LABEL
from components.workloads.mpi import LAUNCHER_CREATION_POLICIES, mpi_worker_hosts
from components.workloads.pods import OUTPUT_FOLDER_CONTAINER
from components.workloads.tensorboard import tensorboard_command
from stacks.config import load_config
from stacks.config.benchmark import merged_experiments
from stacks.kinds import KINDS
from stacks.plan.report import report as plan_report
from tests.harness import (
    JOB_OBJECT_TYPES,
    PROJECT,
    REPO,
    Program,
    Registration,
    contains_unknown,
    resolve,
    run_program,
    stack_config,
    stack_names,
)
from tests.kube import container_env, process_argv

#: The catalog's pinned helper images (busybox), which job pods may run beside the images the stack builds.
PINNED_HELPERS = frozenset(i.ref for i in IMAGES.values())


def _all_jobs(stack: str) -> dict[str, Any]:
    """The stack's jobs as written, and its benchmark's experiments (each a job, ``from`` applied)."""
    cfg = stack_config(stack)
    jobs = dict(cfg.get(f"{PROJECT}:jobs") or {})
    bench = cfg.get(f"{PROJECT}:benchmark")
    if bench:
        merged, problems = merged_experiments(bench["experiments"])
        assert not problems, problems
        jobs.update(merged)
    return jobs


JOB_STACKS = [s for s in stack_names() if _all_jobs(s)]


def _plan(stack: str) -> stacks.plan.Plan:
    return stacks.plan.build_plan(load_config(PROJECT, stack, stack_config(stack)))


def _experiments(stack: str) -> set[str]:
    return set((stack_config(stack).get(f"{PROJECT}:benchmark") or {}).get("experiments") or {})


MODES = [False, True]


def _is_workload(r: Registration) -> bool:
    """A Job or MPIJob of the workloads (not FSx storage's one-shot volume-permissions Job, which runs as root
    with CHOWN and a pinned busybox: tests/mock/test_storage_fsx.py)."""
    return r.type in JOB_OBJECT_TYPES and not r.name.endswith("-volume-init")


def test_every_shipped_stack_runs_jobs() -> None:
    assert JOB_STACKS == stack_names()


def _jobs_cfg(stack: str) -> dict[str, Any]:
    return _all_jobs(stack)


def _job(p: Program, suffix: str) -> Registration:
    return p.one("kubernetes:batch/v1:Job", lambda r: r.name.endswith(suffix))


def _pod(job: Registration) -> dict[str, Any]:
    return job.inputs["spec"]["template"]["spec"]


def _container(job: Registration) -> dict[str, Any]:
    (c,) = _pod(job)["containers"]
    return c


def _pod_templates(r: Registration) -> list[dict[str, Any]]:
    if r.type == "kubernetes:batch/v1:Job":
        return [r.inputs["spec"]["template"]]
    specs = r.inputs["spec"]["mpiReplicaSpecs"]
    return [specs["Launcher"]["template"], specs["Worker"]["template"]]


def _group(stack: str, job: dict[str, Any]) -> dict[str, Any]:
    groups = stack_config(stack)[f"{PROJECT}:nodeGroups"]
    return groups[job.get("nodeGroup") or next(iter(groups))]


@pytest.mark.parametrize("preview", MODES)
@pytest.mark.parametrize("stack", JOB_STACKS)
class TestJobs:
    def test_images_are_built_and_referenced_by_digest(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        builds = p.of_type("pulumi-python:dynamic/eks-training:ImageBuild")
        images = stack_config(stack).get(f"{PROJECT}:images") or {}
        # the bundled image once per torch build its groups' GPUs need (a second only on V100 groups)
        torch_builds = {j.image.torch_build for j in _plan(stack).jobs.values() if j.image.name == "training"}
        torch_builds |= {j.toolbox.torch_build for j in _plan(stack).jobs.values()} | {"cu130"}
        assert len(builds) == len(torch_builds) + len([i for i in images.values() if "context" in i])
        for repo in p.of_type("aws:ecr/repository:Repository"):
            assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
            assert repo.inputs["imageTagMutability"] == "IMMUTABLE"
        for r in p.registrations:
            if not _is_workload(r):
                continue
            assert any(b.urn in r.deps_of("spec") for b in builds), f"{r.name} must use a built image"
            for template in _pod_templates(r):
                for c in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
                    if c["image"] in PINNED_HELPERS:  # the catalog's small helper images, pinned by digest
                        assert "@sha256:" in c["image"], c["image"]
                    elif preview:
                        assert contains_unknown(c["image"]), "the digest is unknown until the build ran"
                    else:
                        assert "@sha256:" in c["image"] and c["image"] in {b.outputs["image_uri"] for b in builds}

    def test_pods_run_unprivileged_on_their_group(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        cfg = _jobs_cfg(stack)
        for r in p.registrations:
            if not _is_workload(r) or "-stage-" in r.name:
                continue
            for template in _pod_templates(r):
                pod = template["spec"]
                assert pod["securityContext"]["runAsNonRoot"] is True
                for c in pod.get("initContainers", []) + pod["containers"]:
                    assert c["securityContext"]["allowPrivilegeEscalation"] is False
                    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
                    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        for name, job in cfg.items():
            if job["kind"] == "mpi":
                continue
            pod = _pod(_job(p, f"-{name}-job"))
            role = job.get("nodeGroup") or next(iter(stack_config(stack)[f"{PROJECT}:nodeGroups"]))
            assert pod["nodeSelector"][NODE_ROLE_LABEL] == role

    def test_pytorch_jobs(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        for name, cfg in _jobs_cfg(stack).items():
            if cfg["kind"] != "pytorch":
                continue
            group = _group(stack, cfg)
            facts = INSTANCE_TYPES[group["instanceTypes"][0]]
            job = _job(p, f"-{name}-job")
            spec, pod, c = job.inputs["spec"], _pod(job), _container(job)
            assert spec["completionMode"] == "Indexed"
            assert spec["completions"] == spec["parallelism"] == cfg["nodes"]
            assert pod["restartPolicy"] == "Never"
            rules = spec["podFailurePolicy"]["rules"]
            assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules
            (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert anti["topologyKey"] == "kubernetes.io/hostname"
            ng = p.one(
                "aws:eks/nodeGroup:NodeGroup", lambda r, g=cfg["nodeGroup"]: r.inputs["labels"][NODE_ROLE_LABEL] == g
            )
            selector = dict(pod["nodeSelector"])
            assert selector.pop("topology.kubernetes.io/zone", None) == group.get("availabilityZone")
            for k, v in selector.items():
                assert ng.inputs["labels"][k] == v
            effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
            assert sorted((x["key"], x["value"], x["effect"]) for x in pod["tolerations"]) == sorted(
                (x["key"], x["value"], effect[x["effect"]]) for x in (ng.inputs.get("taints") or [])
            )
            requests = c["resources"]["requests"]
            assert requests.get("nvidia.com/gpu") == (str(facts.gpus) if facts.gpus else None)
            assert 0.5 * facts.vcpus * 1000 <= millicores_of(requests["cpu"]) <= facts.vcpus * 1000
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            vols = {v["name"]: v for v in pod["volumes"]}
            assert vols[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
            assert "persistentVolumeClaim" in vols[mounts["/data"]]
            svc = p.one("kubernetes:core/v1:Service", lambda r, n=name: r.name.endswith(f"-{n}-service"))
            assert svc.inputs["spec"]["clusterIP"] == "None"
            assert pod["subdomain"] == svc.inputs["metadata"]["name"], "stable hostnames via the headless Service"
            if preview:
                continue
            env = container_env(c, index=0)
            assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
            argv = process_argv(c, env)
            assert argv[:2] == ["python", "/app/launch.py"]
            launcher, cmd = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
            assert cmd[0] == "torchrun"
            assert [x for x in cmd if x.startswith("--rdzv-id=")] == [
                f"--rdzv-id={launcher[launcher.index('--rdzv-id') + 1]}"
            ]
            assert f"--nnodes={cfg.get('minNodes', 1)}:{cfg.get('maxNodes', group['maxSize'])}" in cmd
            assert f"--nproc-per-node={max(1, facts.gpus)}" in cmd
            assert cfg["script"] in cmd
            assert (
                cmd[cmd.index("--output-dir") + 1] == env["OUTPUT_DIR"] == launcher[launcher.index("--output-dir") + 1]
            )
            if name in _experiments(stack):  # a fresh folder per benchmark run
                assert re.fullmatch(rf"/data/benchmarks/run-[0-9a-f]{{10}}/{name}", env["OUTPUT_DIR"]), env[
                    "OUTPUT_DIR"
                ]
            else:
                assert env["OUTPUT_DIR"].startswith(f"/data/runs/{name}-")

    def test_etcd_rendezvous(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        uses = [
            n
            for n, j in _jobs_cfg(stack).items()
            if j["kind"] == "pytorch" and j.get("rendezvousBackend", "etcd-v2") == "etcd-v2"
        ]
        deps = [d for d in p.of_type("kubernetes:apps/v1:Deployment") if "etcd" in d.name]
        assert len(deps) == (1 if uses else 0)
        if not uses:
            return
        (dep,) = deps
        svc = p.one("kubernetes:core/v1:Service", lambda r: r.name.endswith("-etcd-service"))
        pod = dep.inputs["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["image"] == IMAGES["etcd"].ref and "--enable-v2=true" in c["args"]
        assert c["readinessProbe"]["httpGet"]["path"] == "/health"
        assert pod["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
        assert svc.inputs["spec"]["ports"][0]["port"] == 2379
        for name in uses:
            train = _job(p, f"-{name}-job")
            assert svc.urn in train.deps_of("spec")
            if not preview:
                ns = svc.inputs["metadata"]["namespace"]
                assert (
                    f"--rdzv-endpoint={svc.inputs['metadata']['name']}.{ns}.svc.cluster.local:2379"
                    in _container(train)["command"]
                )

    def test_ordering(self, program_for, stack: str, preview: bool) -> None:
        """Staging and the health check run side by side; a job reading the data is created after the staging
        completed and after its check passed; a job after another waits for it in the cluster, reading its
        output folder."""
        p: Program = program_for(stack, preview)
        cfg = _jobs_cfg(stack)
        for name, job in cfg.items():
            r = p.one(
                KINDS[job["kind"]].job_object.type_token,
                lambda x, n=name: x.name.endswith(f"-{n}-job") or x.name.endswith(f"-{n}-mpijob"),
            )
            if job.get("dataset"):
                stage = _job(p, f"-stage-{job['dataset']}-job")
                assert stage.urn in r.dependencies, f"{name} starts after the data is staged"
                assert "pulumi.com/skipAwait" not in (stage.inputs["metadata"].get("annotations") or {})
            if job.get("healthCheck") is not None:
                check = _job(p, f"-{name}-allreduce-job")
                assert check.urn in r.dependencies, f"{name} starts after its all-reduce check"
                assert "pulumi.com/skipAwait" not in (check.inputs["metadata"].get("annotations") or {})
                if job.get("dataset"):
                    stage = _job(p, f"-stage-{job['dataset']}-job")
                    assert not p.depends_transitively(check, stage.urn), "the check does not wait for the staging"
            if not job.get("waitForCompletion"):
                assert r.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
            after = job.get("after") or []
            templates = _pod_templates(r)
            pod = templates[0]["spec"]  # the launcher's for an MPIJob
            inits = [c for c in pod.get("initContainers", []) if c["name"] == "wait-for-jobs"]
            if not after:
                assert not inits
                continue
            (wait,) = inits
            expected = [f"{'mpijobs' if cfg[a]['kind'] == 'mpi' else 'jobs'}/{a}" for a in after]
            assert [wait["command"][i + 1] for i, x in enumerate(wait["command"]) if x == "--job"] == expected
            assert pod["automountServiceAccountToken"] is False, "only the wait container gets the API token"
            token = {
                "name": "kube-api-access",
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True,
            }
            assert wait["volumeMounts"] == [token]
            assert all(token["name"] not in {m["name"] for m in c.get("volumeMounts") or []} for c in pod["containers"])
            (api,) = [v for v in pod["volumes"] if v["name"] == "kube-api-access"]
            assert [next(iter(s)) for s in api["projected"]["sources"]] == [
                "serviceAccountToken",
                "configMap",
                "downwardAPI",
            ]
            role = p.one(
                "kubernetes:rbac.authorization.k8s.io/v1:Role", lambda x, n=name: x.name.endswith(f"-{n}-wait-role")
            )
            assert all(rule["verbs"] == ["get"] and rule["resourceNames"] for rule in role.inputs["rules"])
            assert sorted(n for rule in role.inputs["rules"] for n in rule["resourceNames"]) == sorted(after)
            if not preview:
                main = pod["containers"][0]
                env = container_env(main, index=0)
                for a in after:
                    other = p.one(
                        KINDS[cfg[a]["kind"]].job_object.type_token,
                        lambda x, n=a: x.name.endswith(f"-{n}-job") or x.name.endswith(f"-{n}-mpijob"),
                    )
                    other_env = container_env(_pod_templates(other)[0]["spec"]["containers"][0], index=0)
                    assert env[f"{a.upper().replace('-', '_')}_OUTPUT_DIR"] == other_env["OUTPUT_DIR"]

    def test_kubernetes_objects_go_before_the_cluster_and_no_load_balancer(
        self, program_for, stack: str, preview: bool
    ) -> None:
        p: Program = program_for(stack, preview)
        cluster = p.one("eks:index:Cluster")
        for r in p.registrations:
            if r.type.startswith("kubernetes:"):
                assert p.depends_transitively(r, cluster.urn), f"{r.name} must be deleted before the cluster"
            if r.type == "kubernetes:core/v1:Service":
                assert r.inputs["spec"].get("type", "ClusterIP") != "LoadBalancer"

    def test_outputs(self, program_for, stack: str, preview: bool) -> None:
        p: Program = program_for(stack, preview)
        assert set(p.outputs["jobs"]) == set(_jobs_cfg(stack)) if not preview else "jobs" in p.outputs
        if preview:
            return
        jobs = resolve(p.outputs["jobs"])
        for name, job in jobs.items():
            logs = resolve(job["logsCommand"])
            assert logs.startswith("kubectl logs -n training -f")
            # with a selector, kubectl prints only each pod's last 10 lines unless --tail says otherwise
            # (https://kubernetes.io/docs/reference/kubectl/generated/kubectl_logs/, --tail): the output promises all
            assert " -l " in logs and " --tail=-1 " in logs, logs
            assert resolve(job["outputDir"]).startswith("/data/")
        assert ("tensorboardCommand" in p.outputs) == any(j.get("tensorboard") for j in _jobs_cfg(stack).values())


def _fingerprints(p: Program) -> dict[str, str]:
    def plain(o: Any) -> str:
        return f"{type(o).__name__}:{getattr(o, 'path', o)}"

    return {r.urn: json.dumps(r.inputs, sort_keys=True, default=plain) for r in p.registrations}


def test_changed_training_source_rebuilds_only_the_image_and_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "training", repo / "training", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(stacks.bundle, "ROOT", repo)  # the shipped folders: this copy
    before = _fingerprints(run_program("workshop", fresh=True))
    assert before == _fingerprints(run_program("workshop", fresh=True)), (
        "an unchanged context registers identical inputs (no rebuild)"
    )
    (repo / "training" / "train.py").write_text((repo / "training" / "train.py").read_text() + "\n# a change\n")
    after = _fingerprints(run_program("workshop", fresh=True))
    assert before.keys() == after.keys()
    changed = {urn.rsplit("::", 1)[1] for urn in before if before[urn] != after[urn]}
    assert changed == {
        "eks-training-workshop-image-training-context",
        "eks-training-workshop-image-training-image",
        "eks-training-workshop-stage-cifar10-job",
        "eks-training-workshop-train-allreduce-job",
        "eks-training-workshop-train-job",
        "eks-training-workshop-evaluate-job",
        "eks-training-workshop-tensorboard-deployment",
        # the new image pulled onto the nodes ahead of the jobs
        "eks-training-workshop-prepull-system-training-daemonset",
        "eks-training-workshop-prepull-cpu-training-daemonset",
    }, changed


def test_resizing_keeps_the_run() -> None:
    """A new node count replaces the training Job (pulumi-kubernetes replaces Jobs whose size or template
    changes; delete-before-replace, same name), and the new pods continue the same run."""
    before = run_program("workshop")
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:nodeGroups"]["cpu"].update(maxSize=4, desiredSize=3)
    cfg[f"{PROJECT}:jobs"]["train"].update(nodes=3, maxNodes=4)
    resized = run_program("workshop", config=cfg)
    a, b = _job(before, "-train-job"), _job(resized, "-train-job")
    assert a.urn == b.urn and a.inputs["metadata"]["name"] == b.inputs["metadata"]["name"]
    assert a.inputs["spec"]["completions"] == 2
    assert (b.inputs["spec"]["completions"], b.inputs["spec"]["parallelism"]) == (3, 3)
    env_a, env_b = container_env(_container(a), index=0), container_env(_container(b), index=0)
    assert env_a["OUTPUT_DIR"] == env_b["OUTPUT_DIR"], "the resized job resumes the same run"
    cmd_a, cmd_b = _container(a)["command"], _container(b)["command"]
    assert [x for x in cmd_b if x.startswith("--rdzv-id")] == [x for x in cmd_a if x.startswith("--rdzv-id")]
    assert "--nnodes=1:4" in cmd_b


def test_prebuilt_toolbox_skips_every_build() -> None:
    ref = "123456789012.dkr.ecr.us-east-1.amazonaws.com/my-training@sha256:" + "a" * 64
    cfg = stack_config("g5")
    cfg[f"{PROJECT}:images"] = {"training": {"prebuilt": ref}}
    p = run_program("g5", config=cfg)
    assert not p.of_type("eks-training:index:TrainingImage")
    assert not p.of_type("aws:codebuild/project:Project")
    for job in p.of_type("kubernetes:batch/v1:Job"):
        assert _container(job)["image"] == ref
    assert not [w for w in p.warnings if "prebuilt" in w], p.warnings


def test_a_prebuilt_image_pinned_by_its_tag_alone_is_warned_of() -> None:
    """A tag may name another image by the time a node pulls it (a scale-up, a roll, a resumed job): ``pulumi up``
    warns, naming the key and how to read the digest, and runs the reference as given."""
    ref = "registry.example.com:5000/team/train:2.13"
    cfg = stack_config("dev")
    cfg[f"{PROJECT}:images"] = {"training": {"prebuilt": ref}}
    p = run_program("dev", config=cfg)
    assert p.error is None
    (warning,) = [w for w in p.warnings if "prebuilt" in w]
    assert warning.startswith(f"{PROJECT}:images.training.prebuilt {ref} is pinned by its tag alone"), warning
    assert "registry.example.com:5000/team/train@sha256:<digest>" in warning, warning
    assert {_container(j)["image"] for j in p.of_type("kubernetes:batch/v1:Job") if "stage" not in j.name} == {ref}


def test_a_pytorch_job_on_a_prebuilt_image_of_another_key_is_warned_of_its_scripts() -> None:
    """A pytorch job's pods run torchrun's wrapper from /app; a built image is checked for it, a prebuilt one (an NGC
    image) cannot be: ``pulumi up`` and the plan warn, naming the key and the script, and the job runs as given."""
    ref = "nvcr.io/nvidia/pytorch@sha256:" + "b" * 64
    cfg = stack_config("g5")
    cfg[f"{PROJECT}:images"] = {**cfg.get(f"{PROJECT}:images", {}), "ngc": {"prebuilt": ref}}
    jobs = cfg[f"{PROJECT}:jobs"]
    pytorch = sorted(name for name, job in jobs.items() if job.get("kind") == "pytorch")
    for name in pytorch:
        jobs[name]["image"] = "ngc"
    p = run_program("g5", config=cfg)
    assert p.error is None and pytorch
    (warning,) = [w for w in p.warnings if "prebuilt" in w]
    assert warning.startswith(
        f"{PROJECT}:images.ngc.prebuilt {ref} must hold this project's /app/run_script.py (torchrun's wrapper of a "
        f"pytorch job's script, for job{'s' if len(pytorch) > 1 else ''} {', '.join(pytorch)}) with process_end.py "
        "beside it"
    ), warning
    assert f"{PROJECT}:images.ngc.context" in warning
    plan = stacks.plan.build_plan(load_config(PROJECT, "g5", cfg, REPO))
    (image,) = [i for i in plan_report(plan, "us-east-1")["images"] if i["name"] == "ngc"]
    assert image["warnings"] == [warning]


def test_s3_dataset_gets_a_read_only_pod_identity_role() -> None:
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:datasets"] = {
        "cifar10": {
            "source": "s3://ml-datasets-example/cifar/cifar-10-python.tar.gz",
            "md5": "c58f30108f718f92721af3b95e74349a",
        }
    }
    p = run_program("workshop", config=cfg)
    assoc = p.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", lambda r: "-stage-" in r.name)
    sa = p.one("kubernetes:core/v1:ServiceAccount", lambda r: "-stage-" in r.name)
    assert assoc.inputs["serviceAccount"] == sa.inputs["metadata"]["name"]
    assert assoc.inputs["namespace"] == "training"
    policy = json.loads(p.one("aws:iam/rolePolicy:RolePolicy", lambda r: "stage" in r.name).inputs["policy"])
    assert policy["Statement"] == [
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject"],
            "Resource": "arn:aws:s3:::ml-datasets-example/cifar/cifar-10-python.tar.gz",
        }
    ]
    stage = _job(p, "-stage-cifar10-job")
    assert _pod(stage)["serviceAccountName"] == sa.inputs["metadata"]["name"]
    assert assoc.urn in stage.dependencies


def test_c10d_backend_needs_no_etcd() -> None:
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:jobs"]["train"]["rendezvousBackend"] = "c10d"
    p = run_program("workshop", config=cfg)
    assert not [d for d in p.of_type("kubernetes:apps/v1:Deployment") if "etcd" in d.name]
    cmd = _container(_job(p, "-train-job"))["command"]
    assert "--rdzv-endpoint=train-0.train-workers.training.svc.cluster.local:29400" in cmd
    assert "--rdzv-backend=c10d" in cmd


def test_gpu_pods_request_the_nodes_gpus() -> None:
    cfg = stack_config("g5")
    cfg[f"{PROJECT}:nodeGroups"]["gpu"].update(instanceTypes=["g5.48xlarge"], efa=False)
    p = run_program("g5", config=cfg)
    c = _container(_job(p, "-train-job"))
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "--nproc-per-node=8" in c["command"]
    assert container_env(c, index=0)["OMP_NUM_THREADS"] == str(int(191450 * 0.8) // 100 * 100 // 1000 // 8)


@pytest.mark.parametrize("stack", JOB_STACKS)
def test_every_command_runs_and_every_script_is_in_its_image(program_for, stack: str) -> None:
    """The launcher accepts the pod command the program generates (as the kubelet expands it), and every
    file a pod runs from /app or /opt is copied into that pod's image."""
    sys.path.insert(0, str(REPO / "training"))
    try:
        import launch_args
    finally:
        sys.path.remove(str(REPO / "training"))
    p = program_for(stack, False)
    plan = stacks.plan.build_plan(_config(stack))
    # every build: the images' default ones and the jobs' (a V100 group's job runs another torch build)
    contexts = {i.version: i.context for i in (*plan.images.values(), *plan.used_images) if i.context}
    builds = {
        b.outputs["image_uri"]: b.inputs["image_tag"]
        for b in p.of_type("pulumi-python:dynamic/eks-training:ImageBuild")
    }
    for r in p.registrations:
        if not _is_workload(r):
            continue
        for template in _pod_templates(r):
            for c in template["spec"].get("initContainers", []) + template["spec"]["containers"]:
                argv = process_argv(c, container_env(c, index=0))
                if c["image"] in PINNED_HELPERS:  # busybox: a shell tool, no file of ours
                    assert c["name"] == OUTPUT_FOLDER_CONTAINER and argv[:3] == ["mkdir", "-p", "--"], c
                    continue
                if argv[:2] == ["python", "/app/launch.py"]:
                    launch_args.check_consistency(launch_args.parse_args(argv[2:]))
                context = contexts[builds[c["image"]]]
                for path in (x for x in argv if x.startswith(("/app/", "/opt/")) and "." in x.rsplit("/", 1)[-1]):
                    name = path.rsplit("/", 1)[-1]
                    dockerfile = (context / "Dockerfile").read_text()
                    ignore = (context / ".dockerignore").read_text().split()
                    assert name in dockerfile and f"!{name}" in ignore, (
                        f"{path} is not copied into {context.name}'s image"
                    )


def _config(stack: str) -> Any:
    from stacks.config import load_config

    return load_config(PROJECT, stack, stack_config(stack))


# ------------------------------------------------------------------------------------------- job kinds
def _kinds_stack() -> dict[str, Any]:
    """The workshop stack with one job of every kind, code from S3 and TensorBoard."""
    cfg = stack_config("workshop")
    cfg[f"{PROJECT}:images"] = {
        "nccl-tests": {"context": "images/nccl-tests"},
        "tensorflow": {"context": "images/tensorflow"},
    }
    cfg[f"{PROJECT}:jobs"] = {
        "prep": {
            "kind": "command",
            "command": ["python", "prep.py"],
            "code": "s3://team-code/prep/",
            "nodes": 2,
            "dataset": "cifar10",
            "env": {"SEED": "7"},
        },
        "bench": {
            "kind": "mpi",
            "image": "nccl-tests",
            "nodes": 2,
            "command": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8"],
            "launcherCommand": [
                "python3",
                "/opt/nccl-report/nccl_report.py",
                "--output-json",
                "$(OUTPUT_DIR)/r.json",
                "--",
            ],
        },
        "tf": {
            "kind": "tensorflow",
            "image": "tensorflow",
            "nodes": 2,
            "command": ["python", "/app/train_tf.py"],
            "dataset": "cifar10",
            "after": ["prep"],
            "tensorboard": True,
        },
        "torch": {
            "kind": "pytorch",
            "script": "main.py",
            "code": "s3://team-code/torch/",
            "nodes": 2,
            "after": ["bench", "tf"],
            "tensorboard": "logs",
        },
    }
    return cfg


@pytest.fixture(scope="module")
def kinds() -> Program:
    return run_program("workshop", config=_kinds_stack())


def test_command_job_gets_its_peers(kinds: Program) -> None:
    job = _job(kinds, "-prep-job")
    c = _container(job)
    env = container_env(c, index=1)
    assert env["JOB_INDEX"] == env["RANK"] == env["NODE_RANK"] == "1"
    assert env["WORLD_SIZE"] == env["JOB_SIZE"] == "2"
    peers = env["JOB_PEERS"].split(",")
    assert peers == [f"prep-{i}.prep-workers.training.svc.cluster.local" for i in range(2)]
    assert env["MASTER_ADDR"] == peers[0] and env["MASTER_PORT"] == "29500"
    assert env["SEED"] == "7" and env["DATA_DIR"] == "/data/datasets/cifar10"
    assert process_argv(c, env) == ["python", "prep.py"]
    assert c["workingDir"] == "/workspace"


def test_code_comes_from_s3_through_the_jobs_own_role(kinds: Program) -> None:
    pod = _pod(_job(kinds, "-prep-job"))
    (fetch,) = [c for c in pod["initContainers"] if c["name"] == "fetch-code"]
    assert fetch["command"][-4:] == ["--source", "s3://team-code/prep/", "--dest", "/workspace"]
    assert fetch["securityContext"]["readOnlyRootFilesystem"] is True
    policy = json.loads(
        kinds.one("aws:iam/rolePolicy:RolePolicy", lambda r: r.name.endswith("-prep-code-policy")).inputs["policy"]
    )
    read, listing = policy["Statement"]
    assert read["Action"] == ["s3:GetObject"] and read["Resource"] == "arn:aws:s3:::team-code/prep/*"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["prep/*"]}}
    assoc = kinds.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", lambda r: "-prep-code-" in r.name)
    sa = kinds.one("kubernetes:core/v1:ServiceAccount", lambda r: r.name.endswith("-prep-sa"))
    assert assoc.inputs["serviceAccount"] == pod["serviceAccountName"] == sa.inputs["metadata"]["name"]
    trust = json.loads(
        kinds.one("aws:iam/role:Role", lambda r: r.name.endswith("-prep-code-role")).inputs["assumeRolePolicy"]
    )
    assert trust["Statement"][0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"] == [
        sa.inputs["metadata"]["name"]
    ]


def test_tensorflow_job_gets_tf_config(kinds: Program) -> None:
    c = _container(_job(kinds, "-tf-job"))
    for index in (0, 1):
        env = container_env(c, index=index)
        tf_config = json.loads(env["TF_CONFIG"])
        assert tf_config == {
            "cluster": {"worker": [f"tf-{i}.tf-workers.training.svc.cluster.local:2222" for i in range(2)]},
            "task": {"type": "worker", "index": index},
        }
        assert env["TF_USE_LEGACY_KERAS"] == "1"
    assert {"name": "tf", "containerPort": 2222} in c["ports"]


def test_mpi_job(kinds: Program) -> None:
    (operator,) = kinds.of_type("kubernetes:yaml/v2:ConfigFile")
    assert operator.inputs["file"] == MANIFESTS["mpi-operator"].url and "/v0.8." in operator.inputs["file"]
    mpi = kinds.one("kubernetes:kubeflow.org/v2beta1:MPIJob")
    assert operator.urn in [u for deps in mpi.property_dependencies.values() for u in deps] or p_depends(
        kinds, mpi, operator
    )
    spec = mpi.inputs["spec"]
    assert spec["launcherCreationPolicy"] in LAUNCHER_CREATION_POLICIES
    assert spec["slotsPerWorker"] == 1 and spec["mpiImplementation"] == "OpenMPI"
    launcher, worker = spec["mpiReplicaSpecs"]["Launcher"], spec["mpiReplicaSpecs"]["Worker"]
    assert launcher["replicas"] == 1 and worker["replicas"] == 2
    lpod, wpod = launcher["template"]["spec"], worker["template"]["spec"]
    assert lpod["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
    assert wpod["nodeSelector"][NODE_ROLE_LABEL] == "cpu"
    (lc,) = lpod["containers"]
    argv = lc["command"]
    assert argv[:5] == ["python3", "/opt/nccl-report/nccl_report.py", "--output-json", "$(OUTPUT_DIR)/r.json", "--"]
    mpirun = argv[5:]
    # by its absolute path in the image (the nccl-tests Dockerfile's OPAL_PREFIX): Open MPI then starts the workers'
    # orted from there (orterun(1)), which sshd's PATH does not hold
    assert mpirun[:5] == ["/opt/amazon/openmpi/bin/mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", "2"]
    assert mpirun[-3:] == ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8"]
    (wc,) = wpod["containers"]
    forwarded = {mpirun[i + 1] for i, x in enumerate(mpirun) if x == "-x"}
    assert forwarded == {e["name"] for e in wc["env"]} | {"PATH", "LD_LIBRARY_PATH"}, (
        "every rank gets the workers' environment and the image's paths (sshd's sessions do not)"
    )
    env = container_env(lc)
    assert env == container_env(wc)
    # ranks bootstrapping over TCP find rank 0 on the hostfile's first host (the operator's naming)
    assert env["MASTER_ADDR"] == mpi_worker_hosts("bench", "training", 2)[0] == "bench-worker-0.bench.training.svc"
    assert env["MASTER_PORT"] == "29500" and {"MASTER_ADDR", "MASTER_PORT"} <= forwarded
    assert wc["command"][0] == "/usr/sbin/sshd" and spec["sshAuthMountPath"] == "/home/mpiuser/.ssh"
    assert wc["resources"]["requests"]["cpu"].endswith("m")


def p_depends(p: Program, reg: Registration, target: Registration) -> bool:
    return p.depends_transitively(reg, target.urn)


def test_mpi_job_fields_follow_the_v2beta1_types(kinds: Program) -> None:
    """What the CRD cannot check for us: every field we set exists in MPIJob v2beta1
    (https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/apis/kubeflow/v2beta1/types.go), values are in
    their allowed sets, and each pod template is a valid Kubernetes PodTemplate (strict schema)."""
    from tests.kube_schema import validate as validate_official

    spec_fields = {
        "slotsPerWorker",
        "runLauncherAsWorker",
        "runPolicy",
        "mpiReplicaSpecs",
        "sshAuthMountPath",
        "launcherCreationPolicy",
        "mpiImplementation",
    }
    run_policy_fields = {
        "cleanPodPolicy",
        "ttlSecondsAfterFinished",
        "activeDeadlineSeconds",
        "backoffLimit",
        "schedulingPolicy",
        "suspend",
        "managedBy",
    }
    replica_fields = {"replicas", "template", "restartPolicy"}
    for mpi in kinds.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob"):
        spec = mpi.inputs["spec"]
        assert set(spec) <= spec_fields
        assert set(spec["runPolicy"]) <= run_policy_fields
        assert spec["runPolicy"]["cleanPodPolicy"] in ("All", "Running", "None")
        assert spec["mpiImplementation"] in ("OpenMPI", "Intel", "MPICH")
        assert set(spec["mpiReplicaSpecs"]) == {"Launcher", "Worker"}
        for role, replica in spec["mpiReplicaSpecs"].items():
            assert set(replica) <= replica_fields
            assert replica["restartPolicy"] in ("Never", "OnFailure"), "the operator's validation accepts only these"
            assert replica["replicas"] >= 1
            doc = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": role.lower()},
                "template": replica["template"],
            }
            validate_official(json.loads(json.dumps(doc)), DEFAULT_KUBERNETES_VERSION + ".0")


def test_pytorch_job_runs_its_code_from_s3_through_the_launcher(kinds: Program) -> None:
    c = _container(_job(kinds, "-torch-job"))
    assert c["command"][:2] == ["python", "/app/launch.py"], "the toolbox image's launcher starts torchrun"
    assert "main.py" in c["command"] and c["workingDir"] == "/workspace"
    pod = _pod(_job(kinds, "-torch-job"))
    (wait,) = [x for x in pod["initContainers"] if x["name"] == "wait-for-jobs"]
    assert wait["command"][wait["command"].index("--job") + 1 :] == ["mpijobs/bench", "--job", "jobs/tf"]


def test_tensorboard_serves_the_jobs_logs_read_only(kinds: Program) -> None:
    dep = kinds.one("kubernetes:apps/v1:Deployment", lambda r: "tensorboard" in r.name)
    pod = dep.inputs["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    spec = c["command"][c["command"].index("--logdir_spec") + 1]
    runs = dict(x.split(":", 1) for x in spec.split(","))
    tf_out = container_env(_container(_job(kinds, "-tf-job")), index=0)["OUTPUT_DIR"]
    torch_out = container_env(_container(_job(kinds, "-torch-job")), index=0)["OUTPUT_DIR"]
    assert runs == {"tf": f"{tf_out}/tensorboard", "torch": f"{torch_out}/logs"}
    assert c["command"] == tensorboard_command(runs), "the real-process test runs this command"
    assert "--bind_all" in c["command"]
    assert {"name": "shared", "mountPath": "/data", "readOnly": True} in c["volumeMounts"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["nodeSelector"] == {NODE_ROLE_LABEL: "system"}
    svc = kinds.one("kubernetes:core/v1:Service", lambda r: "tensorboard" in r.name)
    assert svc.inputs["spec"]["type"] == "ClusterIP"
    assert resolve(kinds.outputs["tensorboardCommand"]).startswith("kubectl port-forward -n training svc/")
