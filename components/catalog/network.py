"""In-cluster network facts the training namespace's NetworkPolicies are written against: where cluster DNS,
the EKS Pod Identity Agent and the instance metadata service are, which label names a namespace, and how
the VPC CNI's policy engine treats Services and the node, and what a VPC's DNS must offer the API endpoint
(each with its source key)."""

from typing import Mapping

#: The label the API server sets on every namespace to its name (source key ``k8s-namespace-name-label``):
#: a ``namespaceSelector`` on it selects one namespace by name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: Cluster DNS: the CoreDNS pods (EKS's ``coredns`` add-on) in ``kube-system``, labelled ``k8s-app=kube-dns``
#: like the ``kube-dns`` Service that selects them, serving port 53 over UDP and TCP (source key ``k8s-dns-pods``).
CLUSTER_DNS_NAMESPACE = "kube-system"
CLUSTER_DNS_POD_LABELS: Mapping[str, str] = {"k8s-app": "kube-dns"}
DNS_PORT = 53

#: The EKS Pod Identity Agent: a pod with an association gets ``AWS_CONTAINER_CREDENTIALS_FULL_URI`` =
#: ``http://169.254.170.23/v1/credentials``, i.e. the agent on the pod's node at that link-local address,
#: port 80 (source key ``eks-pod-identity``). It is not the node's IP, so a policy must allow it explicitly.
POD_IDENTITY_AGENT_IPV4 = "169.254.170.23"
POD_IDENTITY_AGENT_PORT = 80

#: The EC2 instance metadata service. Pods that use EKS Pod Identity (or IRSA) do not access it (source key
#: ``vpc-cni-network-policy-considerations``); the training namespace's policies never allow it, so a pod
#: cannot read the node role's credentials even though the launch templates' hop limit of 2 would let it.
INSTANCE_METADATA_IPV4 = "169.254.169.254"

#: Every IPv4 address: a default route's destination, a public endpoint or an egress rule open to all.
ANYWHERE_IPV4 = "0.0.0.0/0"

#: HTTPS: AWS APIs (S3, ECR, STS, EKS Auth), public dataset hosts and the Kubernetes API server (the
#: ``kubernetes`` Service's port, served by the control plane's ENIs in the VPC).
HTTPS_PORT = 443

#: The name a VPC's DHCP options set gives the Amazon-provided DNS server. The cluster's private endpoint resolves
#: only if the VPC's ``domain-name-servers`` include it (source key ``eks-cluster-endpoint``).
AMAZON_DNS = "AmazonProvidedDNS"
#: The addresses the Amazon-provided DNS server answers at beside the VPC's base address plus two (source key
#: ``vpc-dns-server``).
AMAZON_DNS_ADDRESSES = ("169.254.169.253", "fd00:ec2::253")
#: The offset of the Amazon-provided DNS server from the base of the VPC's primary IPv4 block (source key
#: ``vpc-dns-server``).
AMAZON_DNS_OFFSET = 2

#: The private blocks an EKS cluster's Kubernetes service range (``serviceIpv4Cidr``) must lie in, and the prefix
#: lengths EKS takes for it, /12 to /24 (source key ``eks-kubernetes-network-config``).
SERVICE_CIDR_BLOCKS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
SERVICE_CIDR_PREFIXES = (12, 24)
