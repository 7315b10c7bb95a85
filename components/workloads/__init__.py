"""Workloads on the cluster: the training namespace's network policies, etcd for rendezvous, dataset staging,
the all-reduce health check, jobs of every kind (PyTorch elastic, MPI, TensorFlow multi-worker, any command)
and TensorBoard, and the pre-pull of the jobs' images onto their nodes.

All need a ``kubernetes`` provider in ``opts``. Multi-node jobs are placed and sized by a
:class:`~components.workloads.spec.WorkerPlacement` derived from the node group's plan, and share the
fields of a :class:`~components.workloads.spec.JobSpec`. The program's kinds of job, and which component each
builds, are registered in ``stacks/kinds`` (the recipe for a new one: ARCHITECTURE.md).
"""

from typing import TYPE_CHECKING

from components.lazy import lazy_exports

if TYPE_CHECKING:
    from components.workloads.collector import BenchmarkCollector, BenchmarkCollectorArgs, CollectedExperiment
    from components.workloads.command import CommandJob, CommandJobArgs
    from components.workloads.etcd import EtcdRendezvous, EtcdRendezvousArgs
    from components.workloads.health_check import AllReduceHealthCheck, AllReduceHealthCheckArgs
    from components.workloads.mpi import MpiJob, MpiJobArgs
    from components.workloads.mpi_operator import MpiOperator, MpiOperatorArgs
    from components.workloads.network_policy import TrainingNetworkPolicies, TrainingNetworkPoliciesArgs
    from components.workloads.prepull import ImagePrePull, ImagePrePullArgs
    from components.workloads.pytorch import PyTorchJob, PyTorchJobArgs
    from components.workloads.spec import JobSpec, WorkerPlacement, run_id
    from components.workloads.staging import DatasetStaging, DatasetStagingArgs
    from components.workloads.tensorboard import TensorBoard, TensorBoardArgs
    from components.workloads.tensorflow import TensorFlowJob, TensorFlowJobArgs

__getattr__ = lazy_exports(
    __name__,
    {
        "collector": ("BenchmarkCollector", "BenchmarkCollectorArgs", "CollectedExperiment"),
        "command": ("CommandJob", "CommandJobArgs"),
        "etcd": ("EtcdRendezvous", "EtcdRendezvousArgs"),
        "health_check": ("AllReduceHealthCheck", "AllReduceHealthCheckArgs"),
        "mpi": ("MpiJob", "MpiJobArgs"),
        "mpi_operator": ("MpiOperator", "MpiOperatorArgs"),
        "network_policy": ("TrainingNetworkPolicies", "TrainingNetworkPoliciesArgs"),
        "spec": ("JobSpec", "WorkerPlacement", "run_id"),
        "prepull": ("ImagePrePull", "ImagePrePullArgs"),
        "pytorch": ("PyTorchJob", "PyTorchJobArgs"),
        "staging": ("DatasetStaging", "DatasetStagingArgs"),
        "tensorboard": ("TensorBoard", "TensorBoardArgs"),
        "tensorflow": ("TensorFlowJob", "TensorFlowJobArgs"),
    },
)

__all__ = [
    "AllReduceHealthCheck",
    "AllReduceHealthCheckArgs",
    "BenchmarkCollector",
    "BenchmarkCollectorArgs",
    "CollectedExperiment",
    "CommandJob",
    "CommandJobArgs",
    "DatasetStaging",
    "DatasetStagingArgs",
    "EtcdRendezvous",
    "EtcdRendezvousArgs",
    "ImagePrePull",
    "ImagePrePullArgs",
    "JobSpec",
    "MpiJob",
    "MpiJobArgs",
    "MpiOperator",
    "MpiOperatorArgs",
    "PyTorchJob",
    "PyTorchJobArgs",
    "TensorBoard",
    "TensorBoardArgs",
    "TensorFlowJob",
    "TensorFlowJobArgs",
    "TrainingNetworkPolicies",
    "TrainingNetworkPoliciesArgs",
    "WorkerPlacement",
    "run_id",
]
