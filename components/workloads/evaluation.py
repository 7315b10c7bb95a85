"""``EvaluationJob``: evaluate a finished training run's model on the test set."""

import math
import shlex
from typing import Mapping, Optional, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.conventions import COMMON_LABELS
from components.workloads.pods import SHARED_VOLUME_MOUNT, container_security, pod_security, shared_volume

#: The evaluation script in the training image.
EVALUATE_SCRIPT = "/app/evaluate.py"


class EvaluationJobArgs(TypedDict):
    """Inputs of :class:`EvaluationJob`."""

    namespace: pulumi.Input[str]
    """Training namespace."""
    pvc_name: pulumi.Input[str]
    """Shared claim."""
    image: pulumi.Input[str]
    """Training image (contains /app/evaluate.py)."""
    job_name: str
    """Kubernetes name of the Job."""
    run_dir: pulumi.Input[str]
    """The training run's output folder (holds ``model.pt`` and ``DONE``)."""
    data_dir: pulumi.Input[str]
    """Dataset folder."""
    node_selector: NotRequired[Mapping[str, str]]
    """Where the Job runs (CPU is enough: the system nodes)."""
    min_accuracy: NotRequired[float]
    """Fail the Job when the overall accuracy is below this."""
    wait_for_completion: NotRequired[bool]
    """Make ``pulumi up`` wait for the result. Default False."""
    timeout_hours: NotRequired[float]
    """Deadline, including the wait for training. Default 24."""


class EvaluationJob(pulumi.ComponentResource):
    """A Job that waits for the training run's ``DONE`` marker, then evaluates ``model.pt`` on the
    10,000 test images and writes overall and per-class accuracy to ``<run>/evaluation.json`` (the
    last log line carries the same JSON)."""

    job_name: pulumi.Output[str]
    """Name of the Job."""
    result_path: pulumi.Output[str]
    """Path of the JSON result on the shared volume (inside the pods)."""

    def __init__(self, name: str, args: EvaluationJobArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("eks-training:index:EvaluationJob", name, None, opts)
        labels = {**COMMON_LABELS, "app.kubernetes.io/name": "evaluation", "app.kubernetes.io/instance": name}
        timeout_s = int(float(args.get("timeout_hours", 24)) * 3600)
        result = pulumi.Output.concat(args["run_dir"], "/evaluation.json")

        def commands(v: list[object]) -> dict[str, list[str]]:
            run_dir, data_dir = str(v[0]), str(v[1])
            evaluate = [
                "python",
                EVALUATE_SCRIPT,
                "--model",
                f"{run_dir}/model.pt",
                "--data-dir",
                data_dir,
                "--output-json",
                f"{run_dir}/evaluation.json",
            ]
            if args.get("min_accuracy") is not None:
                evaluate += ["--min-accuracy", str(args["min_accuracy"])]
            wait = ["sh", "-c", f"until [ -f {shlex.quote(run_dir + '/DONE')} ]; do sleep 30; done"]
            return {"wait": wait, "evaluate": evaluate}

        cmds = pulumi.Output.all(args["run_dir"], args["data_dir"]).apply(commands)
        annotations = {} if args.get("wait_for_completion") else {"pulumi.com/skipAwait": "true"}
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata={
                "name": args["job_name"],
                "namespace": args["namespace"],
                "labels": labels,
                "annotations": annotations,
            },
            spec={
                "backoff_limit": 3,
                "active_deadline_seconds": timeout_s,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restart_policy": "OnFailure",
                        "automount_service_account_token": False,
                        "node_selector": dict(args.get("node_selector") or {}),
                        "security_context": pod_security(),
                        "init_containers": [
                            {
                                "name": "wait-for-training",
                                "image": args["image"],
                                "command": cmds.apply(lambda c: c["wait"]),
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"memory": "64Mi"},
                                },
                                "volume_mounts": [SHARED_VOLUME_MOUNT],
                                "security_context": container_security(),
                            }
                        ],
                        "containers": [
                            {
                                "name": "evaluate",
                                "image": args["image"],
                                "command": cmds.apply(lambda c: c["evaluate"]),
                                "env": [
                                    {"name": "HOME", "value": "/tmp"},
                                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                                    {"name": "OMP_NUM_THREADS", "value": "1"},
                                ],
                                # requested for the whole wait, so kept small; evaluation of 10,000
                                # 32x32 images on one CPU takes about a minute
                                "resources": {
                                    "requests": {"cpu": "250m", "memory": "1Gi"},
                                    "limits": {"memory": "2Gi"},
                                },
                                "volume_mounts": [SHARED_VOLUME_MOUNT],
                                "security_context": container_security(),
                            }
                        ],
                        "volumes": [shared_volume(args["pvc_name"])],
                    },
                },
            },
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=f"{math.ceil(timeout_s / 60)}m"),
            ),
        )
        self.job_name = job.metadata.name
        self.result_path = result
        self.register_outputs({"job_name": self.job_name, "result_path": self.result_path})
