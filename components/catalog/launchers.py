"""The variables a launcher sets in each process it starts (torchrun's workers, mpirun's ranks).

The container's environment, where Kubernetes expands a ``$(NAME)``, does not have them: a job's command naming
one is passed on as written. A program reads them from its own environment. The real tier runs both launchers
and checks each list (tests/real/test_launcher_variables_real.py).
"""

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Launcher:
    """A program that starts a job's processes and gives each its rank in their environment."""

    name: str
    """The launcher as a user knows it."""
    variables: frozenset[str]
    """The variables it sets in every process it starts."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` listing them."""


#: torchrun's worker variables (torch.distributed.run's documented environment; LocalElasticAgent sets them).
TORCHRUN = Launcher(
    name="torchrun",
    variables=frozenset(
        {
            "LOCAL_RANK",
            "RANK",
            "GROUP_RANK",
            "ROLE_RANK",
            "ROLE_NAME",
            "LOCAL_WORLD_SIZE",
            "WORLD_SIZE",
            "GROUP_WORLD_SIZE",
            "ROLE_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS",
            "TORCHELASTIC_RUN_ID",
        }
    ),
    source="torchrun-environment",
)

#: Open MPI's rank variables, set by mpirun (through orted) in every MPI process.
MPIRUN = Launcher(
    name="mpirun (Open MPI)",
    variables=frozenset(
        {
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
            "OMPI_COMM_WORLD_NODE_RANK",
            "OMPI_UNIVERSE_SIZE",
        }
    ),
    source="openmpi-environment",
)

LAUNCHERS: tuple[Launcher, ...] = (TORCHRUN, MPIRUN)
