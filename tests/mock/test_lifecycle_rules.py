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
