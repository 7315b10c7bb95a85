"""Workloads on the cluster: etcd for rendezvous, dataset staging, the all-reduce health check,
elastic PyTorch training (torchrun in a Kubernetes Indexed Job) and evaluation.

All need a ``kubernetes`` provider in ``opts``. Multi-node jobs are placed and sized by a
:class:`~components.workloads.pods.WorkerPlacement` derived from the node group's plan.
"""

from components.workloads.etcd import EtcdRendezvous, EtcdRendezvousArgs
from components.workloads.evaluation import EvaluationJob, EvaluationJobArgs
from components.workloads.health_check import AllReduceHealthCheck, AllReduceHealthCheckArgs
from components.workloads.pods import WorkerPlacement, run_id
from components.workloads.staging import DatasetStaging, DatasetStagingArgs
from components.workloads.training import ElasticTrainingJob, ElasticTrainingJobArgs, TrainingHyperparameters

__all__ = [
    "AllReduceHealthCheck",
    "AllReduceHealthCheckArgs",
    "DatasetStaging",
    "DatasetStagingArgs",
    "ElasticTrainingJob",
    "ElasticTrainingJobArgs",
    "EtcdRendezvous",
    "EtcdRendezvousArgs",
    "EvaluationJob",
    "EvaluationJobArgs",
    "TrainingHyperparameters",
    "WorkerPlacement",
    "run_id",
]
