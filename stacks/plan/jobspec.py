"""What a job's component gets from the plan (:func:`job_spec`), derived once from the plan for the program's jobs
(:mod:`stacks.workloads`) and the local runner (:mod:`stacks.local`) alike."""

from typing import Optional, Sequence

import pulumi

from components.conventions import check_job_name
from components.workloads.spec import JobSpec, env_name
from stacks.kinds import KINDS
from stacks.plan import JobPlan, Plan


def job_resource(plan: Plan, job: str) -> str:
    """How ``wait_for_jobs.py`` names a job: ``<its kind's resource>/<name>`` (``jobs/<name>``, ``mpijobs/<name>``)."""
    return f"{KINDS[plan.jobs[job].kind].job_object.resource}/{job}"


def job_spec(
    plan: Plan,
    job: JobPlan,
    *,
    namespace: pulumi.Input[str],
    pvc: pulumi.Input[str],
    image: pulumi.Input[str],
    helper_image: pulumi.Input[str],
) -> JobSpec:
    """What a job's component gets from its plan, before the steps it waits for (data, health check, code):
    its name, folders, arguments, environment, order, budgets. The program (:mod:`stacks.workloads`) and the local
    runner (:mod:`stacks.local`) read the same."""
    c = job.config
    spec: JobSpec = {
        "job_name": job.name,
        "namespace": namespace,
        "pvc_name": pvc,
        "image": image,
        "output_dir": job.output_dir,
        "args": list(c.args),
        "env": dict(c.env),
        "input_dirs": {env_name(a): plan.jobs[a].output_dir for a in job.after},
        "after_jobs": [job_resource(plan, a) for a in job.after],
        "helper_image": helper_image,
        "timeout_hours": c.timeout_hours,
        "wait_for_completion": c.wait_for_completion,
        "queue_timeout_hours": c.queue_timeout_hours,
        "read_only_root_filesystem": job.read_only_root_filesystem,
        "stop_grace_period_seconds": c.stop_grace_period_seconds,
    }
    if job.tensorboard_dir:
        spec["tensorboard_dir"] = job.tensorboard_dir
    return spec


def queue_job(spec: JobSpec, plan: Plan, job: JobPlan, team: Optional[str]) -> None:
    """Give ``spec`` the labels that submit the job to its queue (``team``'s in a jobs-only stack) and its pods' Kueue
    annotations."""
    assert plan.admission is not None
    spec["queue_labels"] = plan.admission.labels(job.name, team)
    spec["queue_annotations"] = plan.admission.pod_annotations(job.group.name)


def check_spec(
    plan: Plan,
    job: JobPlan,
    *,
    namespace: pulumi.Input[str],
    pvc: pulumi.Input[str],
    image: pulumi.Input[str],
    team: Optional[str],
    after: Sequence[pulumi.Input[str]],
) -> JobSpec:
    """What a job's all-reduce health check gets from the job's plan: a name of its own, the job's output folder and
    queue timeout, the check's queue labels (``team``'s queue in a jobs-only stack), the job's pods' annotations.
    It takes none of the job's other settings (args, env, timeoutHours, stopGracePeriodSeconds, the read-only root):
    a field added to :func:`job_spec` that the check's pods need goes here too."""
    assert plan.admission is not None
    return {
        "job_name": check_job_name(job.name),
        "namespace": namespace,
        "pvc_name": pvc,
        "image": image,
        "output_dir": job.output_dir,
        "queue_labels": plan.admission.check_labels(job.name, team),
        "queue_annotations": plan.admission.pod_annotations(job.group.name),
        "after": list(after),
        "queue_timeout_hours": job.config.queue_timeout_hours,
    }
