"""A dataset no job names and an image no job runs are read by nothing: ``pulumi up`` warns of each and the plan
notes it (config the program does not read is reported, never ignored); the shipped presets have none."""

from stacks.plan.report import main as plan_main
from stacks.plan.unread import unread_entries
from stacks.stackfile import plan_stack
from tests.harness import PROJECT, run_program, stack_config, stack_names

DATASET = (
    "eks-training:datasets.imagenet: no job names it (a job's dataset), so it is neither staged nor checked; name it "
    "in a job, or remove it"
)
IMAGE = (
    "eks-training:images.nccl-tests: no job runs it (a job's image), so it is not built; name it in a job, or remove it"
)


def _unread() -> dict:
    cfg = stack_config("dev")
    cfg[f"{PROJECT}:datasets"] = {
        **cfg[f"{PROJECT}:datasets"],
        "imagenet": {"source": "s3://acme-data/imagenet.tar.gz"},
    }
    cfg[f"{PROJECT}:images"] = {"nccl-tests": {"context": "images/nccl-tests"}}
    return cfg


def test_pulumi_up_warns_of_a_dataset_and_an_image_nothing_reads() -> None:
    p = run_program("dev", config=_unread())
    assert p.error is None and p.registrations
    assert DATASET in p.warnings and IMAGE in p.warnings, p.warnings
    assert not [r for r in p.registrations if "imagenet" in r.name or "nccl-tests" in r.name]


def test_the_plan_notes_them(tmp_path, capsys) -> None:
    import yaml

    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump({"config": _unread()}))
    assert plan_main(["--stack", "dev", "--stack-file", str(stack_file)]) == 0
    out = capsys.readouterr().out
    assert f"note: {DATASET}\n" in out and f"note: {IMAGE}\n" in out, out


def test_the_presets_leave_nothing_unread() -> None:
    assert {s: unread_entries(plan_stack(s)[1]) for s in stack_names()} == {s: [] for s in stack_names()}


def test_facts_of_a_type_no_group_runs_and_an_mpi_prefix_no_mpi_job_reads_are_noted() -> None:
    cfg = stack_config("dev")
    cfg[f"{PROJECT}:instanceFacts"] = {
        "m7i.2xlarge": {"vcpus": 8, "memoryMib": 32768, "networkGbps": 12.5, "source": "describe-instance-types"}
    }
    cfg[f"{PROJECT}:images"] = {"training": {"context": "training", "mpiPrefix": "/opt/amazon/openmpi"}}
    _, plan = plan_stack("dev", edit=lambda c: c.update(cfg))
    assert unread_entries(plan) == [
        "eks-training:images.training.mpiPrefix: no mpi job runs this image, so nothing reads it; remove it",
        "eks-training:instanceFacts.m7i.2xlarge: no node group runs m7i.2xlarge, so nothing reads these facts; name it "
        "in a group's instanceTypes, or remove it",
    ]
    # a group that runs the type reads its facts
    cfg[f"{PROJECT}:nodeGroups"]["cpu"]["instanceTypes"] = ["m7i.2xlarge"]
    _, plan = plan_stack("dev", edit=lambda c: c.update(cfg))
    assert not [n for n in unread_entries(plan) if "instanceFacts" in n], unread_entries(plan)
