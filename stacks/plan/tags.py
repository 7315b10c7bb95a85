"""The AWS tags of a stack: the environment, the node groups' launch templates (:mod:`stacks.plan.templates`), the
image builds, the jobs' code bucket and the benchmark's collector all carry them."""

from stacks.config import StackConfig


def stack_tags(cfg: StackConfig) -> dict[str, str]:
    """AWS tags on every resource of the stack (the node groups' instances and volumes too)."""
    return {"eks-training/stack": f"{cfg.project}-{cfg.stack}", "managed-by": "pulumi", **cfg.tags}
