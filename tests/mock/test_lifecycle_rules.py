"""Lifecycle rules over every stack and its variants (tests/variants.py: shipped, stress, and kept, with the shared
storage kept on destroy): what ``pulumi destroy`` keeps (``retainOnDelete``, ``protect``) stays usable after it.

A kept resource keeps what its data depends on. The one such dependency here is a KMS key: data encrypted under a
key that destroy schedules for deletion cannot be read once the key is deleted ("Deleting a KMS key is destructive
and potentially dangerous ... After a KMS key is deleted, you can no longer decrypt the data that was encrypted under
that KMS key", https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html). So every kept resource that
names a key the stack creates (by dependency or by its ARN or id in its inputs) must have that key kept too; a kept
resource with no key of the stack uses its service's AWS managed key, which AWS never deletes.
"""

from typing import Any

import pytest

from tests.harness import Program, Registration, stack_names, strings_in
from tests.variants import kept_config, kept_program, stress_program

STACKS = stack_names()
VARIANTS = ["shipped", "stress", "kept"]
#: Resources whose deletion makes the data of what uses them unreadable.
DATA_KEYS = ("aws:kms/key:Key",)


def _program(program_for: Any, stack: str, variant: str) -> Program:
    if variant == "shipped":
        return program_for(stack, False)
    return stress_program(stack) if variant == "stress" else kept_program(stack)


def _kept(r: Registration) -> bool:
    return bool(r.retain_on_delete) or r.protect


def lifecycle_problems(p: Program) -> list[str]:
    """Kept resources that use a key destroy removes."""
    keys = [r for r in p.registrations if r.type in DATA_KEYS]
    problems = []
    for r in p.registrations:
        if not _kept(r):
            continue
        deps = set(r.dependencies) | {u for us in r.property_dependencies.values() for u in us}
        used = set(strings_in(r.inputs))
        for key in keys:
            names = {str(key.outputs.get("arn", "")), str(key.outputs.get("keyId", "")), key.id} - {""}
            if (key.urn in deps or names & used) and not _kept(key):
                problems.append(
                    f"{r.type} {r.name} is kept on destroy but its data is encrypted with {key.name}, "
                    "which destroy deletes"
                )
    return problems


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("stack", STACKS)
def test_what_destroy_keeps_stays_readable(program_for: Any, stack: str, variant: str) -> None:
    p = _program(program_for, stack, variant)
    assert lifecycle_problems(p) == []


def test_the_kept_variants_keep_something() -> None:
    """Every stack's kept variant keeps its file system (the rule above is not vacuous)."""
    for stack in STACKS:
        kept = [r for r in kept_program(stack).registrations if _kept(r)]
        assert any(
            r.type in ("aws:efs/fileSystem:FileSystem", "aws:fsx/lustreFileSystem:LustreFileSystem") for r in kept
        ), stack


def test_the_rule_finds_a_kept_file_system_under_a_deleted_key() -> None:
    """The bug put back: a kept FSx file system encrypted with the cluster's secrets key while destroy schedules that
    key for deletion (the key not kept with it)."""
    cfg = kept_config("p5")
    p = kept_program("p5")
    fs = p.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    key = p.one("aws:kms/key:Key")
    assert fs.retain_on_delete and fs.inputs["kmsKeyId"] == key.outputs["arn"] and key.retain_on_delete
    assert not lifecycle_problems(p)
    bad = Registration(**{**key.__dict__, "retain_on_delete": False})
    broken = Program.__new__(Program)
    broken.__dict__.update(p.__dict__)
    broken.registrations = [bad if r.urn == key.urn else r for r in p.registrations]
    (problem,) = lifecycle_problems(broken)
    assert "kept on destroy" in problem and key.name in problem
    assert cfg["eks-training:storage"]["retainOnDelete"] is True


#: Resources AWS allows one of per scope, whose replacement keeps that scope: Pulumi creates a replacement before it
#: deletes the old one unless told otherwise, and AWS then refuses the new one. So each must delete first.
ONE_PER_SCOPE = {
    # "You can create one mount target in each Availability Zone" (MountTargetConflict): a new subnet in the same
    # zone replaces it (https://docs.aws.amazon.com/efs/latest/ug/manage-fs-access-create-delete-mount-targets.html)
    "aws:efs/mountTarget:MountTarget": "one mount target per zone of a file system",
    # "Each data repository association must have a unique Amazon FSx file system directory and a unique S3 bucket or
    # prefix": a new bucket or prefix for the same directory replaces it
    # (https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateDataRepositoryAssociation.html)
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "one data repository association per directory "
    "of a file system and per S3 prefix",
}


def replacement_problems(p: Program) -> list[str]:
    """Resources of a one-per-scope type that a replacement would create beside the old one."""
    return [
        f"{r.type} {r.name}: AWS allows {ONE_PER_SCOPE[r.type]}, so a replacement must delete the old "
        "one first (delete_before_replace=True)"
        for r in p.registrations
        if r.type in ONE_PER_SCOPE and not r.delete_before_replace
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_a_replacement_of_what_aws_allows_one_of_deletes_the_old_one_first(program_for: Any, stack: str) -> None:
    assert replacement_problems(program_for(stack, False)) == []


def test_every_one_per_scope_type_is_registered_by_some_stack() -> None:
    """The rule is not vacuous: EFS stacks register mount targets, FSx stacks their data repository associations."""
    types = {r.type for stack in STACKS for r in stress_program(stack).registrations}
    assert set(ONE_PER_SCOPE) <= types


def test_the_replacement_rule_finds_a_mount_target_made_beside_its_old_one() -> None:
    """The bug put back: the EFS mount targets without delete_before_replace (a subnet moved within a zone failed
    with MountTargetConflict)."""
    p = stress_program("dev")
    targets = [r for r in p.registrations if r.type == "aws:efs/mountTarget:MountTarget"]
    assert targets and replacement_problems(p) == []
    broken = Program.__new__(Program)
    broken.__dict__.update(p.__dict__)
    broken.registrations = [Registration(**{**r.__dict__, "delete_before_replace": False}) for r in targets]
    assert len(replacement_problems(broken)) == len(targets)
