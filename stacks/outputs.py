"""The stack outputs: ids, the kubeconfig, and the commands to follow the jobs."""

from typing import Any

import pulumi
import pulumi_aws as aws

from stacks.environment import Environment


def export_outputs(env: Environment) -> dict[str, Any]:
    """The stack's outputs (exported by ``__main__``)."""
    cfg = env.config
    region = aws.get_region_output().region
    outputs: dict[str, Any] = {
        "clusterName": env.cluster.cluster_name,
        "kubeconfig": env.cluster.kubeconfig,
        "vpcId": env.vpc_id,
        "privateSubnetIds": env.private_subnet_ids,
        "publicSubnetIds": env.public_subnet_ids,
        "systemNodeGroupName": env.cluster.system_node_group_name,
        "nodeGroupNames": pulumi.Output.all(
            env.cluster.system_node_group_name, *[ng.node_group_name for ng in env.node_groups.values()]
        ),
        "storageBackend": env.storage.backend,
        "fileSystemId": env.storage.file_system_id,
        "datasetRoot": env.storage.dataset_root,
        "pvcName": env.storage.pvc_name,
        "pvcNamespace": env.storage.namespace,
        "updateKubeconfigCommand": pulumi.Output.concat(
            "aws eks update-kubeconfig --region ",
            region,
            " --name ",
            env.cluster.cluster_name,
            " --alias ",
            cfg.cluster_name,
        ),
    }
    storage = env.storage
    if storage.backend == "fsx":
        fsx = {
            "fsxDataBucket": storage.data_bucket_name,
            "fsxDataRepositoryPath": storage.data_repository_path,
            "fsxExportRepositoryPath": storage.export_repository_path,
            "fsxSecurityGroupId": storage.security_group_id,
            "fsxDnsName": storage.dns_name,
        }
        outputs.update({k: v for k, v in fsx.items() if v is not None})
    else:
        outputs["efsFileSystemId"] = storage.file_system_id  # the name earlier versions exported
    w = env.workloads
    if w is not None:
        ns = env.storage.namespace
        outputs.update(
            {
                "imageUri": w.image_uri,
                "stagingJobName": w.staging.job_name,
                "trainingJobName": w.training.job_name,
                "evaluationJobName": w.evaluation.job_name,
                "runDirectory": w.training.output_dir,
                "followTrainingLogsCommand": pulumi.Output.concat(
                    "kubectl logs -n ",
                    ns,
                    " -f --prefix --max-log-requests 64 -l eks-training/job=",
                    w.training.job_name,
                ),
                "evaluationResultCommand": pulumi.Output.concat(
                    "kubectl wait -n ",
                    ns,
                    " --for=condition=complete --timeout=24h job/",
                    w.evaluation.job_name,
                    " && kubectl logs -n ",
                    ns,
                    " job/",
                    w.evaluation.job_name,
                    " --tail=1",
                ),
            }
        )
        if w.image is not None:
            outputs["imageBuildLogLink"] = w.image.build_log_link
    return outputs
