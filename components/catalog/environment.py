"""Who else sets a job's variables: the launchers in each process they start, and the cluster in the container.

The kubelet expands a ``$(NAME)`` in a container's command and args from the container's own environment: the
variables the program writes in the pod, and those the cluster adds (:data:`CLUSTER_VARIABLES`). A launcher's
(torchrun's workers, mpirun's ranks) come later, in each process it starts, so a ``$(NAME)`` naming one is passed on
as written; a program reads them from its own environment. The real tier runs both launchers and checks each list
(tests/real/test_launcher_variables_real.py).
"""

import re
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


@dataclass(frozen=True, kw_only=True)
class ClusterVariables:
    """Variables something in the cluster adds to a job's containers, which a ``$(NAME)`` may name."""

    by: str
    """What adds them."""
    pattern: str
    """A regular expression their names match whole."""
    source: str
    """Key of :data:`components.catalog.sources.SOURCES` describing them."""
    in_env: bool = False
    """They are in scope in the values of the container's ``env`` too (the kubelet expands those against the earlier
    entries and the service links only), not only in its command and args."""

    def names(self, name: str) -> bool:
        """Whether ``name`` is one of them."""
        return re.fullmatch(self.pattern, name) is not None


#: What adds variables to a job's containers besides the program, before the kubelet expands their command and args.
CLUSTER_VARIABLES: tuple[ClusterVariables, ...] = (
    ClusterVariables(
        by="the kubelet, for each Service of the namespace (service links)",
        pattern=r"[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)",
        source="kubernetes-service-variables",
        in_env=True,
    ),
    ClusterVariables(by="EKS Pod Identity's webhook", pattern=r"AWS_[A-Z0-9_]+", source="eks-pod-identity"),
    ClusterVariables(
        by="the NVIDIA device plugin, on GPU nodes", pattern=r"NVIDIA_[A-Z0-9_]+", source="nvidia-device-plugin-env"
    ),
    ClusterVariables(
        by="the MPI Operator, in an mpi job's launcher and workers",
        pattern=r"K_MPI_JOB_ROLE",
        source="mpi-operator-env",
    ),
)
