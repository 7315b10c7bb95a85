"""``TrainingNetworkPolicies``: the training namespace denies all traffic but what its workloads need.

Every pod may reach DNS (:func:`dns_egress`). The pods of one job may reach each other on any port
(:func:`within_job`). The pods of jobs may reach HTTPS in ``egress_cidrs`` and the Pod Identity Agent, never the
instance metadata service (:func:`job_egress`). Only PyTorch pods with the ``etcd-v2`` rendezvous reach etcd's 2379
(:func:`etcd_server`, :func:`etcd_clients`). Nothing reaches TensorBoard over the pod network. Kubelet probes, the
EFS mount and TensorBoard's port-forward need no rule (source keys ``aws-network-policy-node-ip``, ``efs-csi-node``,
``containerd-port-forward``).

Why, with the sources: docs/explanation/security.md, "Network policies"."""

from typing import Optional, Sequence, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from typing_extensions import NotRequired

from components.args import checks_args
from components.catalog import (
    ANYWHERE_IPV4,
    CLUSTER_DNS_NAMESPACE,
    CLUSTER_DNS_POD_LABELS,
    DNS_PORT,
    HTTPS_PORT,
    NAMESPACE_NAME_LABEL,
    POD_IDENTITY_AGENT_IPV4,
    POD_IDENTITY_AGENT_PORT,
)
from components.conventions import COMMON_LABELS, ETCD_APP, JOB_LABEL, RENDEZVOUS_LABEL
from components.kubernetes_provider import warn_without_kubernetes_provider
from components.naming import k8s_name
from components.workloads.etcd import ETCD_CLIENT_PORT

NetworkPolicySpec = k8s.networking.v1.NetworkPolicySpecArgsDict


def default_deny() -> NetworkPolicySpec:
    """Every pod of the namespace isolated in both directions: only what another policy allows passes (policies add
    up, source key ``k8s-network-policies``; the VPC CNI enforces them, source key ``vpc-cni-network-policy``)."""
    return {"pod_selector": {}, "policy_types": ["Ingress", "Egress"]}


def dns_egress() -> NetworkPolicySpec:
    """Every pod may ask the cluster's DNS (the CoreDNS pods in ``kube-system``, and so the ``kube-dns``
    Service's ClusterIP, whose selector is the same label: source key ``aws-network-policy-service-ips``)."""
    return {
        "pod_selector": {},
        "policy_types": ["Egress"],
        "egress": [
            {
                "to": [
                    {
                        "namespace_selector": {"match_labels": {NAMESPACE_NAME_LABEL: CLUSTER_DNS_NAMESPACE}},
                        "pod_selector": {"match_labels": dict(CLUSTER_DNS_POD_LABELS)},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": DNS_PORT}, {"protocol": "TCP", "port": DNS_PORT}],
            }
        ],
    }


def job_egress(cidrs: Sequence[str]) -> NetworkPolicySpec:
    """Pods of jobs may open HTTPS connections to ``cidrs`` and fetch Pod Identity credentials from the agent (source
    key ``eks-pod-identity``); never the instance metadata service (source key
    ``vpc-cni-network-policy-considerations``)."""
    return {
        "pod_selector": {"match_expressions": [{"key": JOB_LABEL, "operator": "Exists"}]},
        "policy_types": ["Egress"],
        "egress": [
            {"to": [{"ip_block": {"cidr": c}} for c in cidrs], "ports": [{"protocol": "TCP", "port": HTTPS_PORT}]},
            {
                "to": [{"ip_block": {"cidr": f"{POD_IDENTITY_AGENT_IPV4}/32"}}],
                "ports": [{"protocol": "TCP", "port": POD_IDENTITY_AGENT_PORT}],
            },
        ],
    }


def within_job(job: str) -> NetworkPolicySpec:
    """The pods of ``job`` reach each other on any port and protocol, in both directions."""
    peers: list[k8s.networking.v1.NetworkPolicyPeerArgsDict] = [{"pod_selector": {"match_labels": {JOB_LABEL: job}}}]
    return {
        "pod_selector": {"match_labels": {JOB_LABEL: job}},
        "policy_types": ["Ingress", "Egress"],
        "ingress": [{"from_": peers}],
        "egress": [{"to": peers}],
    }


def etcd_server() -> NetworkPolicySpec:
    """etcd accepts its client port from etcd-v2 rendezvous clients only."""
    return {
        "pod_selector": {"match_labels": {"app.kubernetes.io/name": ETCD_APP}},
        "policy_types": ["Ingress"],
        "ingress": [
            {
                "from_": [{"pod_selector": {"match_labels": {RENDEZVOUS_LABEL: "etcd-v2"}}}],
                "ports": [{"protocol": "TCP", "port": ETCD_CLIENT_PORT}],
            }
        ],
    }


def etcd_clients() -> NetworkPolicySpec:
    """etcd-v2 rendezvous clients may connect to etcd's client port (its pods, and its Service's ClusterIP)."""
    return {
        "pod_selector": {"match_labels": {RENDEZVOUS_LABEL: "etcd-v2"}},
        "policy_types": ["Egress"],
        "egress": [
            {
                "to": [{"pod_selector": {"match_labels": {"app.kubernetes.io/name": ETCD_APP}}}],
                "ports": [{"protocol": "TCP", "port": ETCD_CLIENT_PORT}],
            }
        ],
    }


class TrainingNetworkPoliciesArgs(TypedDict):
    """Inputs of :class:`TrainingNetworkPolicies`."""

    namespace: pulumi.Input[str]
    """The training namespace: every pod in it is isolated in both directions."""
    jobs: Sequence[str]
    """Jobs (the ``eks-training/job`` label of their pods) whose pods talk to each other on any port."""
    etcd: NotRequired[bool]
    """Admit etcd-v2 rendezvous clients (``eks-training/rendezvous=etcd-v2``) to etcd on 2379. Default False."""
    egress_cidrs: NotRequired[Sequence[str]]
    """Where pods of jobs may open HTTPS (443) connections. Default ``0.0.0.0/0``."""


class TrainingNetworkPolicies(pulumi.ComponentResource):
    """NetworkPolicies of the training namespace: default deny in both directions, then DNS for every pod,
    any port within a job, HTTPS and Pod Identity credentials for the pods of jobs, etcd's client port for its
    rendezvous clients only (see the module's docstring for why nothing else is needed). Needs a
    ``kubernetes`` provider in ``opts`` and a CNI that enforces NetworkPolicies (the VPC CNI with
    ``enableNetworkPolicy``); without one the policies are stored and have no effect."""

    namespace: pulumi.Output[str]
    """The namespace; resolves once every policy exists, so objects created in it come after the policies."""
    policy_names: pulumi.Output[list[str]]
    """Names of the NetworkPolicies."""

    @checks_args
    def __init__(
        self, name: str, args: TrainingNetworkPoliciesArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> None:
        super().__init__("eks-training:index:TrainingNetworkPolicies", name, None, opts)
        warn_without_kubernetes_provider(self, name)
        namespace = args["namespace"]
        jobs = list(args["jobs"])
        if len(set(jobs)) != len(jobs):
            raise ValueError(f"{name}: jobs must be unique, got {jobs}")
        specs: dict[str, NetworkPolicySpec] = {
            "default-deny": default_deny(),
            "dns": dns_egress(),
            # by default anywhere: AWS service endpoints have no fixed addresses; the API server's ENIs are in the VPC
            "job-egress": job_egress(list(args.get("egress_cidrs") or [ANYWHERE_IPV4])),
        }
        if args.get("etcd", False):
            specs["etcd-server"] = etcd_server()
            specs["etcd-clients"] = etcd_clients()
        for job in jobs:
            specs[f"job-{job}"] = within_job(job)
        policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{role}",
                metadata={"name": k8s_name(name, role), "namespace": namespace, "labels": dict(COMMON_LABELS)},
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role, spec in specs.items()
        ]
        self.policy_names = pulumi.Output.all(*[p.metadata.name for p in policies]).apply(list)
        self.namespace = pulumi.Output.all(namespace, *[p.urn for p in policies]).apply(lambda v: str(v[0]))
        self.register_outputs({"namespace": self.namespace, "policy_names": self.policy_names})
