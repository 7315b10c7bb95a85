"""IAM policy documents shared by components (pure functions, no resources)."""

import json
from typing import Sequence


def pod_identity_trust_policy(account_id: str, cluster_name: str, namespace: str, service_accounts: Sequence[str]) -> str:
    """Trust policy for a role assumed through EKS Pod Identity, limited to one cluster, one
    namespace and the given service accounts via the session tags Pod Identity sets
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "EksPodIdentity",
                    "Effect": "Allow",
                    "Principal": {"Service": "pods.eks.amazonaws.com"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                    "Condition": {
                        "StringEquals": {
                            "aws:SourceAccount": account_id,
                            "aws:RequestTag/eks-cluster-name": cluster_name,
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": list(service_accounts),
                        }
                    },
                }
            ],
        },
        sort_keys=True,
    )
