"""Entries of the stack file that nothing reads: a dataset no job names, an image no job runs, facts of an instance
type no group uses, an image's ``mpiPrefix`` no MPI job reads. They are reported, at ``pulumi up`` as warnings and in
the plan as notes, never left silently unread."""

from components.catalog import INSTANCE_TYPES
from stacks.bundle import TOOLBOX_IMAGE
from stacks.config import key
from stacks.kinds import KINDS
from stacks.plan.model import Plan


def unread_entries(plan: Plan) -> list[str]:
    """One line per entry the configuration declares and nothing uses."""
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
    mpi = {j.config.image for j in plan.jobs.values() if KINDS[j.kind].needs_mpi_prefix}
    notes += [
        f"{key(f'images.{name}.mpiPrefix')}: no mpi job runs this image, so nothing reads it; remove it"
        for name, image in cfg.images.items()
        if image.mpi_prefix is not None and name in run and name not in mpi
    ]
    used = {t for g in plan.all_groups for t in g.instance_types}
    notes += [
        f"{key(f'instanceFacts.{name}')}: no node group runs {name}, so nothing reads these facts; name it in a "
        "group's instanceTypes, or remove it"
        for name in cfg.catalog.instance_types
        if name not in INSTANCE_TYPES and name not in used
    ]
    return notes
