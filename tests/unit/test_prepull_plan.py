"""Which images the stack pulls onto which nodes ahead of their pods (:mod:`stacks.plan.prepull`): a job's image on its
group when its kind has a no-op, the toolbox where the health check and the staging run, only on groups with nodes at
creation, never for a job the program does not create now; and the plan report shows them."""

from typing import Any

from components.scheduling import system_node_selector
from stacks.kinds import KINDS
from stacks.plan.prepull import MIN_DISK_GIB, TOOLBOX_NOOP, prepulls
from stacks.plan.report import render, report
from stacks.stackfile import plan_stack


def _by_pair(stack: str, edit: Any = None, deferred: tuple[str, ...] = ()) -> dict[tuple[str, str], Any]:
    _config, plan = plan_stack(stack, edit=edit)
    return {(p.group, p.image): p for p in prepulls(plan, deferred)}


def test_the_workshop_pulls_the_training_image_where_its_check_its_job_and_its_staging_run() -> None:
    _config, plan = plan_stack("workshop")
    pulls = _by_pair("workshop")
    assert set(pulls) == {("system", "training"), ("cpu", "training")}
    cpu, system = pulls["cpu", "training"], pulls["system", "training"]
    assert cpu.needed_by == ("health check of train", "job train")
    assert system.needed_by == ("staging of cifar10", "job evaluate"), "the evaluation's command starts with python"
    assert cpu.command == KINDS["pytorch"].noop_command(plan.jobs["train"].config) == TOOLBOX_NOOP
    placement = plan.jobs["train"].placement
    assert dict(cpu.node_selector) == dict(placement["node_selector"])
    assert list(cpu.tolerations) == list(placement["tolerations"])
    assert dict(system.node_selector) == system_node_selector() and not system.tolerations


def test_a_kind_without_a_script_pulls_ahead_only_when_its_command_starts_with_python() -> None:
    _config, plan = plan_stack("workshop")
    evaluate = plan.jobs["evaluate"].config
    assert evaluate.kind == "command"
    noop = KINDS["command"].noop_command
    for command, expected in [
        (["python", "eval.py"], ("python", "-c", "")),
        (["/usr/bin/python3.12", "-m", "x"], ("/usr/bin/python3.12", "-c", "")),
        (["python3", "train.py"], ("python3", "-c", "")),
        (["bash", "-c", "python x.py"], ()),
        (["./run.sh"], ()),
        (["pythonic"], ()),
    ]:
        assert noop(evaluate.model_copy(update={"command": command})) == expected, command
    tensorflow = evaluate.model_copy(update={"command": ["python3", "t.py"]})
    assert KINDS["tensorflow"].noop_command(tensorflow) == ("python3", "-c", "")
    assert KINDS["mpi"].noop_command(evaluate) == ("/bin/sh", "-c", ":")


def test_a_tainted_gpu_group_gets_its_tolerations_and_no_system_node_an_mpi_launchers_image() -> None:
    _config, plan = plan_stack("mpi-horovod")
    pulls = _by_pair("mpi-horovod")
    gpu = pulls["gpu", plan.jobs["horovod"].image.variant]
    assert list(gpu.tolerations) == list(plan.jobs["horovod"].placement["tolerations"]) and gpu.tolerations
    assert gpu.command == KINDS["mpi"].noop_command(plan.jobs["horovod"].config)
    assert ("system", plan.jobs["horovod"].image.variant) not in pulls, "the launcher waits for its workers' pull"


def test_no_pre_pull_on_a_group_without_nodes_at_creation_nor_for_a_job_not_created_now() -> None:
    def no_nodes(cfg: dict[str, Any]) -> None:
        group = cfg["eks-training:nodeGroups"]["cpu"]
        group.update(minSize=0, desiredSize=0)

    pulls = _by_pair("workshop", edit=no_nodes)
    assert set(pulls) == {("system", "training")}
    deferred = _by_pair("workshop", deferred=("train", "evaluate"))
    assert set(deferred) == {("system", "training")}, "the staging is registered still"


def test_no_pre_pull_on_a_root_volume_smaller_than_the_system_default() -> None:
    """The pods keep their images on the nodes: a 20 GiB system disk (the smallest allowed) gets none."""

    def small_system_disk(cfg: dict[str, Any]) -> None:
        cfg.setdefault("eks-training:systemNodeGroup", {})["diskSizeGib"] = 20

    assert MIN_DISK_GIB == 50
    assert set(_by_pair("workshop", edit=small_system_disk)) == {("cpu", "training")}


def test_the_plan_report_lists_the_pre_pulls() -> None:
    _config, plan = plan_stack("workshop")
    r = report(plan, "us-east-1")
    assert {(p["group"], p["image"]) for p in r["prePulls"]} == {("system", "training"), ("cpu", "training")}
    assert "training on cpu (health check of train, job train)" in render(r)


def test_a_job_with_code_pulls_the_toolbox_where_its_pods_download_it() -> None:
    """The fetch-code init container runs the toolbox before the job's own image: on an MPI job's GPU workers, whose
    image is another, the toolbox is pulled ahead too."""

    def nccl_with_code(cfg: dict[str, Any]) -> None:
        cfg["eks-training:jobs"]["nccl"]["code"] = "s3://team-code/nccl/"

    _config, plan = plan_stack("mpi-horovod", edit=nccl_with_code)
    toolbox = plan.jobs["nccl"].toolbox.variant
    assert toolbox != plan.jobs["nccl"].image.variant
    assert _by_pair("mpi-horovod", edit=nccl_with_code)["gpu", toolbox].needed_by == ("code download of nccl",)
    assert ("gpu", toolbox) not in _by_pair("mpi-horovod"), "without code, nothing runs the toolbox there"
