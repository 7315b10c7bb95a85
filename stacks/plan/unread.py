"""Entries of the stack file that nothing reads: a dataset no job names, an image no job runs. They are reported,
at ``pulumi up`` as warnings and in the plan as notes, never left silently unread."""

from stacks.bundle import TOOLBOX_IMAGE
from stacks.config import key
from stacks.plan.model import Plan


def unread_entries(plan: Plan) -> list[str]:
    """One line per dataset and image the configuration declares and no job uses."""
    cfg = plan.config
    run = {j.config.image for j in plan.jobs.values()}
    notes = [
        f"{key(f'datasets.{name}')}: no job names it (a job's dataset), so it is neither staged nor checked; name "
        "it in a job, or remove it"
        for name in cfg.datasets
        if name not in plan.datasets
    ]
    notes += [
        f"{key(f'images.{name}')}: no job runs it (a job's image), so it is not built; name it in a job, or remove it"
        for name in cfg.images
        if name not in run and name != TOOLBOX_IMAGE
    ]
    return notes
