"""The public sources behind every fact in the catalog: a key -> a URL a user can open, and what it shows.

Every fact row names one or more of these keys; ``tests/unit/test_catalog.py`` checks that each key
used exists here, that each source is an ``https://`` address, and that a file on GitHub is cited at a commit or a
tag (the one whose content was read), never at a branch such as ``main``.
"""

from dataclasses import dataclass
from typing import Mapping

from components.catalog.prices import EKS_PRICES_AS_OF, PRICES_AS_OF


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where a fact comes from."""

    url: str
    """A public address a user can open."""
    shows: str
    """What the page shows that the catalog relies on."""


SOURCES: Mapping[str, Source] = {
    # --- instance types -------------------------------------------------------------------------
    "ec2-accelerated-specs": Source(
        url="https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html",
        shows="accelerated-computing types: vCPUs, memory, GPUs and GPU memory, network cards, EFA, baseline bandwidth",
    ),
    "ec2-general-specs": Source(
        url="https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html",
        shows="general-purpose types (m5): vCPUs, memory, baseline bandwidth (m5.large 0.75 Gbps, m5.xlarge 1.25 Gbps)",
    ),
    "ec2-compute-specs": Source(
        url="https://docs.aws.amazon.com/ec2/latest/instancetypes/co.html",
        shows="compute-optimized types (c5): vCPUs, memory, baseline bandwidth",
    ),
    "karpenter-instance-types": Source(
        url="https://karpenter.sh/docs/reference/instance-types/",
        shows="EC2 DescribeInstanceTypes values per type (MiB memory, GPU MiB, EFA interfaces, network bandwidth) and "
        "the allocatable CPU/memory Kubernetes sees on AL2023 after kube/system reservations",
    ),
    "eks-ami-eni-max-pods": Source(
        url="https://github.com/awslabs/amazon-eks-ami/blob/2377b69aaeb8d751af1a265c2bfbeb94e6f6da90/templates/shared/"
        "runtime/eni-max-pods.txt",
        shows="the maximum pods per instance type with the VPC CNI: ENIs x (IPv4 addresses per ENI - 1) + 2",
    ),
    "eks-mng-max-pods": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/choosing-instance-type.html",
        shows="managed node groups cap maxPods at 110 on instances with fewer than 30 vCPUs and at 250 on the others",
    ),
    "karpenter-instance-types-v1.0": Source(
        url="https://karpenter.sh/v1.0/reference/instance-types/",
        shows="the same table for p3.2xlarge and p3.16xlarge (dropped from the current page)",
    ),
    "ec2-network-cards": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
        shows="network cards per type and one EFA interface per network card on multi-card instances",
    ),
    "ec2-on-demand-prices": Source(
        url="https://aws.amazon.com/ec2/pricing/on-demand/",
        shows=f"On-Demand Linux prices in us-east-1 (the values here as published on {PRICES_AS_OF})",
    ),
    "ec2-g5": Source(
        url="https://aws.amazon.com/ec2/instance-types/g5/",
        shows="g5.12xlarge: 4 x A10G, 48 vCPUs, 192 GiB, 3800 GB NVMe, 40 Gbps, EFA from g5.8xlarge up; $5.672/h",
    ),
    "ec2-m5": Source(
        url="https://aws.amazon.com/ec2/instance-types/m5/",
        shows="m5.large 2 vCPUs/8 GiB, m5.xlarge 4 vCPUs/16 GiB; no EFA below m5n/m5dn.24xlarge",
    ),
    # --- GPUs and CUDA ---------------------------------------------------------------------------
    "nvidia-compute-capabilities": Source(
        url="https://developer.nvidia.com/cuda-gpus",
        shows="compute capability per GPU: V100 7.0, T4 7.5, A100 8.0, A10G 8.6, L4 8.9, L40S 8.9, H100 9.0, H200 9.0, "
        "B200 10.0",
    ),
    "cuda-compatibility": Source(
        url="https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility",
        shows="a cubin for compute capability X.y runs only on X.z with z >= y; PTX for X.y is JIT-compiled for X.y "
        "and higher; sm_90a/sm_100a code runs on exactly that compute capability",
    ),
    "nccl-default-gencode": Source(
        url="https://github.com/NVIDIA/nccl/blob/v2.29.3-1/makefiles/common.mk#L36-L57",
        shows="NCCL's own NVCC_GENCODE for CUDA >= 12.8: sm_60, sm_61, sm_70, sm_80, sm_90, sm_100, sm_120 and "
        "compute_120 PTX (an NVCC_GENCODE given to make replaces it)",
    ),
    "eks-fsx-csi-efa": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-tuning-efa.html",
        shows="FSx for Lustre over EFA from EKS nodes: the node group's bootstrap (preBootstrapCommands) checks the "
        "EFA driver (>= 2.12.1, else installs it), installs the Lustre client and configures LNet on the EFA "
        "interfaces before mounting",
    ),
    "eks-ami-al2023-lustre": Source(
        url="https://github.com/awslabs/amazon-eks-ami/pull/2696",
        shows="the EKS AL2023 AMI build (templates/al2023/provisioners/install-worker.sh) installs no lustre-client; "
        "a change adding it was declined by the maintainers, who point to node user data (a MIME shell part running "
        "dnf install -y lustre-client) instead",
    ),
    "pcluster-al2023-lustre": Source(
        url="https://github.com/aws/aws-parallelcluster-cookbook/blob/f75d84c38ecfac1891e5f3e8fe2d424cc3e7448d/"
        "cookbooks/aws-parallelcluster-environment/resources/lustre/lustre_alinux2023.rb",
        shows="AWS ParallelCluster's Lustre client on Amazon Linux 2023: the lustre-client package only (no kmod, no "
        "kernel change), then it mounts: the AL2023 kernel carries the client's kernel modules",
    ),
    "eks-fsx-csi-tuning": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-tuning-non-efa.html",
        shows="the EKS guide's launch-template user data for FSx for Lustre nodes: on AL2023 dnf install -y "
        "lustre-client, then modprobe lustre and lctl on the host",
    ),
    "fsx-csi-image": Source(
        url="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/5b227125add708cd0b87c76abe1a4c074e71dfc5/"
        "Dockerfile",
        shows="the FSx CSI driver image installs lustre-client (al23) for its mount helper; the kernel module is the "
        "node's, not loaded from the container",
    ),
    "fsx-csi-host-userspace": Source(
        url="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/pull/460",
        shows="Amazon Linux keeps the Lustre kernel module and the user-space tools apart; CSI users on AL miss the "
        "user-space tools on the node, which the server needs to propagate configuration to the client",
    ),
    "lustre-param-upcall": Source(
        url="https://github.com/lustre/lustre-release/blob/c881f8ebcbd130cf6c2b9e8862582fc5d2da5289/lustre/obdclass/"
        "obd_config.c",
        shows="process_param2_config: a client applies a persistent parameter (lctl set_param -P) by running "
        "/usr/sbin/lctl set_param on its host",
    ),
    "al2023-deterministic-upgrades": Source(
        url="https://docs.aws.amazon.com/linux/al2023/ug/deterministic-upgrades.html",
        shows="an AL2023 instance's package repository is locked to its AMI's release version, so dnf installs the "
        "packages of that release",
    ),
    # --- EKS, AMIs, EFA ---------------------------------------------------------------------------
    "aws-cli-exec-info": Source(
        url="https://github.com/aws/aws-cli/pull/6476",
        shows="aws eks get-token reads KUBERNETES_EXEC_INFO and answers in the API version the kubeconfig asks for "
        "(released in aws-cli 1.23.9 and 2.6.3); before, it answered client.authentication.k8s.io/v1alpha1",
    ),
    "aws-cli-install": Source(
        url="https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html",
        shows="how to install or update the AWS CLI version 2",
    ),
    "pulumi-eks-prerequisites": Source(
        url="https://www.pulumi.com/registry/packages/eks/installation-configuration/",
        shows="pulumi-eks needs the AWS CLI (1.16.156 or later): the cluster's kubeconfig authenticates through it "
        "(aws eks get-token)",
    ),
    "eks-nvidia-ami": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html",
        shows="instance families the AL2023 x86_64 NVIDIA AMI supports; AMI types AL2023_x86_64_NVIDIA/STANDARD",
    ),
    "eks-efa": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html",
        shows="EFA on EKS: 5128 pre-allocated 2 MiB huge pages (pods request hugepages-2Mi: 5120Mi), efa-only "
        "interfaces need VPC CNI >= 1.18.5",
    ),
    "aws-ofi-nccl-env": Source(
        url="https://github.com/aws/aws-ofi-nccl/blob/2daf7d303aa139a03140aa530957d10521e4478d/doc/efa-env-var.md",
        shows="which NCCL/libfabric variables EFA needs per aws-ofi-nccl version (FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA)",
    ),
    "efa-cheatsheet": Source(
        url="https://github.com/aws-samples/awsome-distributed-training/blob/7217859f67bc693c52ff175ccc6082c41dbd7a1b/"
        "1.architectures/efa-cheatsheet.md",
        shows="NCCL_SOCKET_IFNAME, NCCL_SHM_USE_CUDA_MEMCPY=1 on g5/g6 (about 2x intra-node bandwidth)",
    ),
    "nccl-tests-results": Source(
        url="https://github.com/aws-samples/awsome-distributed-training/blob/7217859f67bc693c52ff175ccc6082c41dbd7a1b/"
        "micro-benchmarks/nccl-tests/README.md",
        shows="2-node all_reduce_perf bus bandwidth: 2 x p4de 78.33 GB/s at 2 GiB (Slurm); 2 x p5 on EKS 437.79 GB/s "
        "at 2 GiB",
    ),
    "nccl-tests-busbw": Source(
        url="https://github.com/NVIDIA/nccl-tests/blob/a0b82b2260cf5152b9f8c061bbf7eaf0ba096432/doc/PERFORMANCE.md",
        shows="bus bandwidth of an all-reduce over n ranks is algbw x 2(n-1)/n (algbw = bytes / time), comparable with "
        "the hardware's peak bandwidth; nccl-tests prints it in GB/s",
    ),
    "allreduce-lower-bound": Source(
        url="https://www.cs.fsu.edu/~xyuan/paper/09jpdc.pdf",
        shows="Patarasuk and Yuan, Bandwidth optimal all-reduce algorithms for clusters of workstations (JPDC 2009): "
        "in an all-reduce of S bytes over N nodes each node sends at least 2(N-1)S/N bytes, so algbw <= N B / (2(N-1)) "
        "for a node bandwidth B",
    ),
    "nvidia-nvlink": Source(
        url="https://www.nvidia.com/en-us/data-center/nvlink/",
        shows="fifth-generation NVLink (Blackwell): 1.8 TB/s of GPU-to-GPU bandwidth per GPU, the fastest NVLink; "
        "fourth generation (Hopper) 900 GB/s",
    ),
    "ec2-memory-specs": Source(
        url="https://docs.aws.amazon.com/ec2/latest/instancetypes/mo.html",
        shows="memory-optimized types: the most memory per vCPU is u-24tb1.112xlarge, 24576 GiB for 448 vCPUs (about "
        "55 GiB per vCPU); general-purpose t3.nano has the least, 0.5 GiB for 2 vCPUs (ec2-general-specs)",
    ),
    "eks-addons": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/workloads-add-ons-available-eks.html",
        shows="EKS managed add-on names (vpc-cni, kube-proxy, coredns, eks-pod-identity-agent, metrics-server, "
        "aws-efs-csi-driver)",
    ),
    # --- add-on versions per Kubernetes minor, and what each version has (components/catalog/addons.py) ----------
    "vpc-cni-versions-eks-blueprints": Source(
        url="https://github.com/awslabs/cdk-eks-blueprints/blob/05d3dbd0a462409bf002c989750d0de13bf83af2/lib/addons/"
        "vpc-cni/index.ts",
        shows="AWS's EKS Blueprints for CDK install vpc-cni v1.20.4-eksbuild.2 on Kubernetes 1.31, 1.32, 1.33 and "
        "1.34 and v1.21.1-eksbuild.1 on 1.35 (its versionMap, 1.35 added 2026-04-08)",
    ),
    "vpc-cni-one-minor-step": Source(
        url="https://github.com/terraform-aws-modules/terraform-aws-eks/issues/2749",
        shows="EKS's UpdateAddon refuses vpc-cni v1.13.4 -> v1.15.0: 'Updating VPC-CNI can only go up or down 1 minor "
        "version at a time' (InvalidParameterException); v1.14 first, then v1.15, works",
    ),
    "pod-identity-agent-one-minor-step": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/add-ons-pod-id.html",
        shows="the EKS Pod Identity Agent add-on (eks-pod-identity-agent) updates only one minor version at a time: "
        "from 1.28 to 1.30, update to a 1.29 version first, then to 1.30",
    ),
    "vpc-cni-1.36-describe-addon-versions": Source(
        url="https://github.com/aobao32/eks-101-workshop/blob/9aba525edd529db10ce2c44f4efb8395fb5b8aa2/"
        "18-EKS-Network-performance.md",
        shows="aws eks describe-addon-versions --addon-name vpc-cni --kubernetes-version 1.36 (ap-southeast-1, "
        "2026-09-24) lists v1.23.1-eksbuild.1, v1.23.0-eksbuild.1, v1.22.4-eksbuild.3 (EKS's default for 1.36) and "
        "v1.22.3-eksbuild.1; an EKS 1.36 cluster runs v1.22.4-eksbuild.3",
    ),
    "cloudwatch-observability-versions-eks-blueprints": Source(
        url="https://github.com/awslabs/cdk-eks-blueprints/blob/05d3dbd0a462409bf002c989750d0de13bf83af2/lib/addons/"
        "cloud-watch-insights/index.ts",
        shows="AWS's EKS Blueprints for CDK install amazon-cloudwatch-observability v4.10.1-eksbuild.1 on Kubernetes "
        "1.32, 1.33 and 1.34 and v5.3.1-eksbuild.1 on 1.35 (its versionMap, read with aws eks "
        "describe-addon-versions; 1.35 added 2026-04-08)",
    ),
    "cloudwatch-observability-chart-history": Source(
        url="https://github.com/aws-observability/helm-charts/blob/v1.7.0/charts/amazon-cloudwatch-observability/"
        "values.yaml",
        shows="the chart's values at release 1.7.0 (2024-05-23) are the first with the root tolerations list (1.6.0 "
        "has none); agent.config is in the values of every release from 1.4.0, the first in the repository",
    ),
    "cloudwatch-observability-dcgm-instance-types": Source(
        url="https://github.com/aws-observability/helm-charts/commit/895662de1ae77feda0822eea72c321bdfb829a27",
        shows="'add blackwell GPU instances' (pull request 258, 2025-12-12) adds p6-b200.48xlarge to the node affinity "
        "of dcgmExporter; it ships in releases 4.8.0 to 4.10.3 and, on the 5.x line, only from 5.3.0 (RELEASE_NOTES: "
        "'Support Blackwell GPU instances (#258)'; branches release-5.0.0 to release-5.2.3 lack it); p5en.48xlarge is "
        "listed from 3.0.0, p5e.48xlarge from 2.3.0, g6 and g6e from 2.1.2, the older NVIDIA types from 1.5.0",
    ),
    "eks-node-monitoring-agent-dcgm-tolerations": Source(
        url="https://github.com/aws/eks-node-monitoring-agent/commit/92366c73b130851750f3ba8ce88552d897890166",
        shows="'Add dcgm agent tolerations with default value' (pull request 5, 2025-05-14): chart 1.3.0 is the first "
        "whose values and dcgm DaemonSet template take dcgmAgent.tolerations; the add-on's configuration schema "
        "(charts/configuration.schema.json, published from 2026-02) lists dcgmAgent.tolerations",
    ),
    "eks-node-monitoring-agent-dcgm-instance-types": Source(
        url="https://github.com/aws/eks-node-monitoring-agent/commit/d0aa5ef5a24bc8ec99a627bc3572e2084e34d296",
        shows="the 1.4.3 release (2025-12-23, image v1.4.3-eksbuild.2, 'DCGM: update instances') adds "
        "p3dn.24xlarge, p4de.24xlarge and p6-b200.48xlarge to the node affinity of dcgmAgent; p5en.48xlarge is listed "
        "from the 1.4.0 release, the other NVIDIA types of the catalog from the first chart",
    ),
    "efs-csi-pod-identity": Source(
        url="https://github.com/kubernetes-sigs/aws-efs-csi-driver/blob/a4fc67600be60d0f8350dc9459e55ff04e9aa944/"
        "CHANGELOG-2.x.md",
        shows="V2.0.5: 'Add Pod Identity Support' (#1254)",
    ),
    "efs-csi-subpath-pattern": Source(
        url="https://github.com/kubernetes-sigs/aws-efs-csi-driver/blob/a4fc67600be60d0f8350dc9459e55ff04e9aa944/"
        "CHANGELOG-1.x.md",
        shows="V1.7.0: 'Added Storage Class features to allow more control of the directory structure of Access Points "
        "under Dynamic Provisioning' (#640: subPathPattern, ensureUniqueDirectory; pkg/driver/controller.go has them "
        "from tag v1.7.0)",
    ),
    "eks-kubernetes-versions": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html",
        shows="release, end of standard and end of extended support per minor (1.35 and 1.36 also on "
        "https://endoflife.date/amazon-eks); billing for extended support starts at the beginning of the "
        "end-of-standard-support day (UTC); upgradePolicy.supportType STANDARD|EXTENDED, EXTENDED by default; nodes "
        "three minors behind the control plane are tested, the same minor is recommended",
    ),
    "eks-enable-extended-support": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/enable-extended-support.html",
        shows="a cluster whose upgrade policy enables extended support but whose version is still in standard support "
        "incurs standard costs; only clusters in the extended support period incur the higher cost",
    ),
    "eks-update-cluster": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateClusterVersion.html",
        shows="a cluster update moves one Kubernetes minor at a time and cannot go back (the user guide's "
        "update-cluster.html); updates are asynchronous and should finish within a few minutes; every managed node "
        "group's Kubernetes version must match the cluster's before the cluster can be updated to a new version",
    ),
    "eks-update-nodegroup": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html",
        shows="UpdateNodegroupVersion changes a managed node group's Kubernetes version, AMI release or launch "
        "template version (its nodes roll); UpdateNodegroupConfig (API_UpdateNodegroupConfig.html) changes labels, "
        "taints, scaling and update settings in place; neither changes instance types, capacity type, AMI type or "
        "subnets, so a change of those is a new node group",
    ),
    "eks-update-nodegroup-release": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html",
        shows="releaseVersion: by default, the latest available AMI version for the node group's Kubernetes version "
        "is used; you cannot roll back a node group to an earlier Kubernetes version or AMI version",
    ),
    "kubernetes-version-skew": Source(
        url="https://kubernetes.io/releases/version-skew-policy/",
        shows="kubelet must not be newer than kube-apiserver, and may be up to three minor versions older",
    ),
    "eks-extended-support-pricing": Source(
        url="https://aws.amazon.com/blogs/containers/amazon-eks-extended-support-for-kubernetes-versions-pricing/",
        shows="$0.60 per cluster-hour in extended support ($0.10 in standard support)",
    ),
    "eks-network-requirements": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html",
        shows="cluster subnets can't be in zone IDs use1-az3 (us-east-1), usw1-az2 (us-west-1), cac1-az3 "
        "(ca-central-1); the VPC must have DNS hostname and DNS resolution support, or nodes can't register",
    ),
    "eks-cluster-endpoint": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html",
        shows="for the private endpoint's private hosted zone to route traffic to the API server, the VPC must have "
        "enableDnsHostnames and enableDnsSupport set to true, and its DHCP options set must include AmazonProvidedDNS "
        "in its domain name servers list",
    ),
    "vpc-dns-server": Source(
        url="https://docs.aws.amazon.com/vpc/latest/userguide/AmazonDNS-concepts.html",
        shows="the Amazon DNS server (Route 53 Resolver) runs at the base of the VPC IPv4 network range plus two, and "
        "at 169.254.169.253 (IPv4) and fd00:ec2::253 (IPv6)",
    ),
    "vpc-cni-network-policy": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html",
        shows='the vpc-cni add-on enforces NetworkPolicy with configuration values {"enableNetworkPolicy": "true"} (>= '
        'v1.14)',
    ),
    "vpc-cni-network-policy-considerations": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html",
        shows="VPC CNI network policy considerations: policies apply to pods with ownerReferences (Deployment, Job "
        "pods); a Service's port must equal its container port; pods that use EKS Pod Identity or IRSA do not access "
        "EC2 IMDS",
    ),
    "aws-network-policy-service-ips": Source(
        url="https://github.com/aws/amazon-network-policy-controller-k8s/blob/"
        "ecc7e6a79394528bdb397e1fbd927dae64383bec/pkg/resolvers/endpoints.go",
        shows="getMatchingServiceClusterIPs: an egress rule's podSelector also allows the ClusterIP of every "
        "non-headless Service (in the peer's namespaces) whose spec.selector the podSelector matches, because the "
        "agent's eBPF programs see a connection before kube-proxy's DNAT (a port whose named targetPort could get "
        "around the policy is left out)",
    ),
    "aws-network-policy-node-ip": Source(
        url="https://github.com/aws/aws-network-policy-agent/pull/65",
        shows="the node agent allows all traffic to and from the node's IP (kubelet probes), as Kubernetes requires",
    ),
    "k8s-network-policies": Source(
        url="https://kubernetes.io/docs/concepts/services-networking/network-policies/",
        shows="NetworkPolicy semantics: isolation per direction by any selecting policy, allow-lists that add up, "
        "peers (podSelector, namespaceSelector, both, ipBlock), ports (protocol TCP by default, named ports, "
        "endPort); pods cannot block access from their resident node",
    ),
    "k8s-namespace-name-label": Source(
        url="https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name",
        shows="kubernetes.io/metadata.name: set by the control plane on every namespace to its name",
    ),
    "k8s-dns-pods": Source(
        url="https://kubernetes.io/docs/tasks/administer-cluster/dns-debugging-resolution/",
        shows="the cluster DNS pods in kube-system carry k8s-app=kube-dns; the kube-dns Service serves 53/UDP and "
        "53/TCP",
    ),
    "eks-pod-identity": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html",
        shows="a pod with an association gets AWS_CONTAINER_CREDENTIALS_FULL_URI=http://169.254.170.23/v1/credentials "
        "and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE from EKS's webhook "
        "(the agent listens on 169.254.170.23 and [fd00:ec2::23], "
        "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html)",
    ),
    "containerd-port-forward": Source(
        url="https://github.com/containerd/containerd/blob/301026e58c619e63d09c0ec411012e54c0124b03/internal/cri/"
        "server/sandbox_portforward_linux.go",
        shows="kubectl port-forward: containerd dials localhost:<port> inside the pod's network namespace (IPv4, then "
        "IPv6 localhost): the connection never arrives from another pod",
    ),
    "efs-csi-node-restart": Source(
        url="https://github.com/kubernetes-sigs/aws-efs-csi-driver/issues/973",
        shows="the EFS CSI node pod runs the mounts' TLS tunnels (stunnel): while it restarts for an update, the "
        "pods' file access on those mounts can hang until the new pod restarts the tunnels",
    ),
    "efs-csi-node": Source(
        url="https://github.com/kubernetes-sigs/aws-efs-csi-driver/blob/a4fc67600be60d0f8350dc9459e55ff04e9aa944/"
        "charts/aws-efs-csi-driver/templates/node-daemonset.yaml",
        shows="the EFS CSI node plugin runs with hostNetwork: true and mounts the file system on the "
        "node; pods see a bind mount, their own network never carries NFS",
    ),
    "k8s-service-account-token-volume": Source(
        url="https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/#bound-service-account-token-volume",
        shows="the projected volume a pod that automounts its token gets at "
        "/var/run/secrets/kubernetes.io/serviceaccount: a serviceAccountToken (expirationSeconds 3607, rotated by the "
        "kubelet), ca.crt from the kube-root-ca.crt ConfigMap, the namespace from the downward API",
    ),
    "k8s-image-pull-policy": Source(
        url="https://kubernetes.io/docs/concepts/containers/images/#imagepullpolicy-defaulting",
        shows="an image given by digest defaults to imagePullPolicy IfNotPresent; a digest always names the same image",
    ),
    "eks-control-plane-logs": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html",
        shows="control-plane logs go to the log group /aws/eks/<cluster-name>/cluster",
    ),
    "cloudwatch-retention": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html",
        shows="retentionInDays: 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, "
        "2922, 3288, 3653",
    ),
    "cluster-autoscaler-gpu-label": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.35.2/cluster-autoscaler/cloudprovider/aws/README.md",
        shows="GPU nodes carry k8s.amazonaws.com/accelerator=<gpu-type> (the key makes a node a GPU node for the "
        "autoscaler; the value names the GPU in its metrics)",
    ),
    # --- operations: node health, Container Insights, CloudWatch --------------------------------------
    "eks-node-health": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/node-health.html",
        shows="the node monitoring agent (add-on eks-node-monitoring-agent) sets node conditions; node auto repair "
        "reacts to Ready alone or, with the agent, to KernelReady, NetworkingReady, StorageReady and "
        "AcceleratedHardwareReady; both are Linux only",
    ),
    "eks-node-repair": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html",
        shows="repair after 10 min (AcceleratedHardwareReady: Replace or Reboot) or 30 min (other conditions: "
        "Replace); managed node groups stop repairing when a group of more than 5 nodes has more than 20% unhealthy; "
        "maxUnhealthyNodeThreshold{Count,Percentage} and maxParallelNodesRepaired{Count,Percentage} (0-100), a count "
        "or a percentage, not both; nodeRepairConfigOverrides, each with nodeMonitoringCondition, nodeUnhealthyReason, "
        "minRepairWaitTimeMins and repairAction (Replace, Reboot or NoAction), all four required",
    ),
    "eks-node-health-nma": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/node-health-nma.html",
        shows="AcceleratedHardwareReady reasons and their repair actions: DCGMError (connection to the DCGM host "
        "process lost or never established), DCGMDiagnosticFailure and fatal DCGMHealthCode conditions: None; "
        "NvidiaXID<code>Error: Replace or Reboot (13, 31, 48, 63, 64, 94, 95 Reboot; 74, 79, 119, 120, 121, 140 "
        "Replace); NvidiaDoubleBitError, NvidiaNVLinkError: Replace",
    ),
    "nma-dcgm-error-latched": Source(
        url="https://github.com/aws/eks-node-monitoring-agent/issues/266",
        shows="once the agent reports DCGMError (its host engine unreachable, e.g. on a freshly booted node or while "
        "an engine restarts), no code path clears it: AcceleratedHardwareReady stays False until the agent's pod "
        "restarts (fix proposed in pull request 275)",
    ),
    "eks-node-monitoring-agent-chart": Source(
        url="https://github.com/aws/eks-node-monitoring-agent/blob/51af5494fde6d2ed4629df2ed9f847ae800957fd/charts/"
        "eks-node-monitoring-agent/values.yaml",
        shows="nodeAgent.tolerations defaults to [{operator: Exists}] (the agent runs on every node, tainted or not); "
        "dcgmAgent.tolerations (the dcgm-server DaemonSet, the DCGM host engine the agent reads GPU health from) "
        "defaults to []",
    ),
    "eks-node-monitoring-agent-dcgm": Source(
        url="https://github.com/aws/eks-node-monitoring-agent/blob/51af5494fde6d2ed4629df2ed9f847ae800957fd/charts/"
        "eks-node-monitoring-agent/templates/dcgm-daemonset.yaml",
        shows="dcgm-server runs nv-hostengine -n -b ALL on hostPort 5555 with only dcgmAgent.tolerations; the agent "
        "connects to localhost:5555 (monitors/nvidia/dcgm/dcgm_client.go, DCGM_ADDRESS is not an add-on setting) and "
        "reports DCGMError, DefaultSeverity Fatal (pkg/reasons/reasons.yaml), when it cannot; the add-on's "
        "configuration schema (charts/configuration.schema.json) allows global, nodeAgent, dcgmAgent "
        "(affinity, nodeSelector, podAnnotations, podLabels, priorityClassName, resources, resizePolicy, tolerations) "
        "and extraObjects, and no option to turn dcgm-server off or point the agent at another host engine",
    ),
    "dcgm-one-host-engine": Source(
        url="https://github.com/aws/containers-roadmap/issues/2763",
        shows="with another DCGM installation on the node (GPU operator, the CloudWatch Observability add-on) the node "
        "monitoring agent reports AcceleratedHardwareReady=false and nodes get terminated; no workaround other than "
        "the agent's own DCGM (open request, 2026-02)",
    ),
    "cloudwatch-observability-dcgm-exporter": Source(
        url="https://github.com/aws-observability/helm-charts/blob/71a298ffdebe9d4e13ac709d24398062a2afe8ca/charts/"
        "amazon-cloudwatch-observability/templates/linux/dcgm-exporter-daemonset.yaml",
        shows="the add-on's DcgmExporter runs NVIDIA's dcgm-exporter with its own embedded host engine, a fixed "
        "metricsConfig that includes the profiling field DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and no setting for a remote "
        "host engine (-r); dcgmExporter.enabled: false removes it (and the GPU metrics)",
    ),
    "nvidia-v100-datasheet": Source(
        url="https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf",
        shows="V100 SXM2: Tensor Performance 125 TFLOPS (deep learning, mixed precision); Interconnect "
        "Bandwidth NVLink 300 GB/s",
    ),
    "nvidia-t4-datasheet": Source(
        url="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf",
        shows="T4: mixed precision (FP16/FP32) 65 TFLOPS; Interconnect Bandwidth 32 GB/sec (PCIe Gen3 x16)",
    ),
    "nvidia-a100-datasheet": Source(
        url="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
        shows="A100 SXM: BFLOAT16 and FP16 Tensor Core 312 TFLOPS, 624 TFLOPS with sparsity; Interconnect "
        "NVIDIA NVLink 600 GB/s",
    ),
    "nvidia-l4-datasheet": Source(
        url="https://www.nvidia.com/en-us/data-center/l4/",
        shows="L4: FP16 and BF16 Tensor Core 242 teraFLOPS, with sparsity (121 dense); Interconnect PCIe "
        "Gen4 x16 64GB/s",
    ),
    "nvidia-l40s-datasheet": Source(
        url="https://www.nvidia.com/en-us/data-center/l40s/",
        shows="L40S: BF16 and FP16 Tensor Core 362.05 TFLOPS, 733 with sparsity; Interconnect Interface PCIe Gen4 x16: "
        "64GB/s bidirectional",
    ),
    "nvidia-h100-datasheet": Source(
        url="https://www.nvidia.com/en-us/data-center/h100/",
        shows="H100 SXM: BF16 and FP16 Tensor Core 1,979 teraFLOPS with sparsity (989.5 dense); Interconnect "
        "NVIDIA NVLink 900GB/s",
    ),
    "nvidia-h200-datasheet": Source(
        url="https://www.nvidia.com/en-us/data-center/h200/",
        shows="H200 SXM: BF16 and FP16 Tensor Core 1,979 TFLOPS with sparsity (989.5 dense); Interconnect "
        "NVIDIA NVLink 900GB/s",
    ),
    "nvidia-hgx-b200-datasheet": Source(
        url="https://www.nvidia.com/en-us/data-center/hgx/",
        shows="HGX B200 (8 GPUs): FP16/BF16 Tensor Core 36 PFLOPS with sparsity (2.25 PFLOPS dense per GPU); NVLink "
        "(fifth generation) 1.8TB/s GPU-to-GPU bandwidth per GPU",
    ),
    "cloudwatch-observability-addon": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/install-CloudWatch-Observability-EKS-addon.html",
        shows="add-on amazon-cloudwatch-observability: Container Insights with enhanced observability (NVIDIA GPU "
        "metrics through DCGM, EFA metrics) and Fluent Bit; from v3.1.0 EKS Pod Identity for the service account "
        "cloudwatch-agent in namespace amazon-cloudwatch with CloudWatchAgentServerPolicy",
    ),
    "cloudwatch-agent-server-policy": Source(
        url="https://docs.aws.amazon.com/aws-managed-policy/latest/reference/CloudWatchAgentServerPolicy.html",
        shows="the AWS managed policy for the CloudWatch agent: cloudwatch:PutMetricData, the CloudWatch Logs writes, "
        "ec2:DescribeVolumes/DescribeTags, ssm:GetParameter on AmazonCloudWatch-*",
    ),
    "cloudwatch-observability-chart": Source(
        url="https://github.com/aws-observability/helm-charts/blob/71a298ffdebe9d4e13ac709d24398062a2afe8ca/charts/"
        "amazon-cloudwatch-observability/values.yaml",
        shows="the add-on's values: root tolerations (default [{operator: Exists}]) apply to the agent, Fluent Bit, "
        "DCGM exporter and other DaemonSets unless a component overrides them; agent.config replaces the agent's "
        "default configuration, whose logs.metrics_collected.application_signals and "
        "traces.traces_collected.application_signals turn Application Signals on, and without which "
        "templates/_helpers.tpl (manager.modify-auto-monitor-config) sets the operator's monitorAllServices to false",
    ),
    "container-insights-log-groups": Source(
        url="https://github.com/aws/amazon-cloudwatch-agent/blob/ab55b8daa204e95c42c0267ee5aa49ec3b3a7317/translator/"
        "tocwconfig/sampleConfig/base_container_insights_config.yaml",
        shows="the agent's Container Insights EMF exporter writes to log group /aws/containerinsights/{ClusterName}/"
        "performance",
    ),
    "container-insights-metrics": Source(
        url="https://github.com/aws/amazon-cloudwatch-agent/blob/ab55b8daa204e95c42c0267ee5aa49ec3b3a7317/translator/"
        "translate/otel/exporter/awsemf/kubernetes.go",
        shows="the metrics the agent publishes to the ContainerInsights namespace and their dimension sets: "
        "node_gpu_* under [ClusterName], [ClusterName, NodeName, InstanceId], [+InstanceType, GpuDevice]; node_efa_* "
        "likewise with NetworkInterfaceId; cluster_node_count under [ClusterName] (also "
        "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-enhanced-EKS.html)",
    ),
    "cloudwatch-alarm-evaluation": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html",
        shows="an alarm's evaluation range (period x evaluation periods) is at most one day; TreatMissingData",
    ),
    "cloudwatch-metrics-insights-alarms": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-alarms.html",
        shows="an alarm may watch a Metrics Insights query (SELECT ... FROM SCHEMA(...) WHERE ...) that returns one "
        "time series",
    ),
    "cloudwatch-metrics-insights-limits": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-limits.html",
        shows="Metrics Insights queries read recent data only (the most recent three hours in the original limits); "
        "each GetMetricData operation can have only one query (a dashboard has many widgets, each with one query)",
    ),
    "cloudwatch-metrics-insights-grammar": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-querylanguage.html",
        shows="SELECT FUNCTION(metric) FROM namespace | SCHEMA(namespace, keys) WHERE key OPERATOR 'value' [AND ...] "
        "GROUP BY ...; the documented WHERE examples combine = and != conditions with AND",
    ),
    "cloudwatch-dashboard-body": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html",
        shows="dashboard body: widgets with type, x, y, width, height (24-unit grid) and properties; a metric widget's "
        "metrics (arrays, or expressions such as Metrics Insights SQL), view, region; dashboard names up to 255 "
        "characters of A-Za-z0-9-_",
    ),
    "cloudwatch-dashboard-url": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/create_dashboard.html",
        shows="a dashboard opens at https://<console host>/cloudwatch/home?region=<region>#dashboards/dashboard/<name>",
    ),
    "sns-cloudwatch-kms": Source(
        url="https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger",
        shows="CloudWatch alarms cannot publish to a topic encrypted with the AWS managed key alias/aws/sns; use a "
        "customer managed key whose policy lets cloudwatch.amazonaws.com call kms:Decrypt and kms:GenerateDataKey*",
    ),
    # --- name limits -------------------------------------------------------------------------------
    "eks-kubernetes-network-config": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_KubernetesNetworkConfigRequest.html",
        shows="serviceIpv4Cidr: within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, no overlap with the VPC's "
        "blocks, between /24 and /12; set only when the cluster is created",
    ),
    "eks-create-cluster": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateCluster.html",
        shows="cluster name: 1-100 characters, pattern ^[0-9A-Za-z][A-Za-z0-9\\-_]*",
    ),
    "tf-eks-node-group": Source(
        url="https://github.com/hashicorp/terraform-provider-aws/blob/012e0a32f0686212f447447fd3d81c3d0ce256ad/"
        "internal/service/eks/node_group.go",
        shows="node_group_name at most 63 characters, node_group_name_prefix at most 63 - 26 = 37 (the provider "
        "appends a 26-character unique suffix)",
    ),
    "tf-eks-node-group-release-version": Source(
        url="https://github.com/hashicorp/terraform-provider-aws/blob/012e0a32f0686212f447447fd3d81c3d0ce256ad/"
        "internal/service/eks/node_group.go",
        shows="resourceNodeGroupUpdate calls UpdateNodegroupVersion when launch_template, release_version or version "
        "changes, and puts release_version in the request only when it changed (d.HasChange(\"release_version\"))",
    ),
    "tf-launch-template-version": Source(
        url="https://github.com/hashicorp/terraform-provider-aws/blob/025e4f81cab8553cb052aebfcc5987e2aa8c702a/"
        "internal/service/ec2/ec2_launch_template.go",
        shows="resourceLaunchTemplateUpdate creates a new launch template version when any of its data changes "
        "(block_device_mappings, tag_specifications, user_data, network_interfaces, metadata_options, description...), "
        "not when only its own tags do; update_default_version makes it the default",
    ),
    "iam-quotas": Source(
        url="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html",
        shows="role names at most 64 characters, policy names at most 128; characters [\\w+=,.@-]",
    ),
    "ec2-create-launch-template": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html",
        shows="LaunchTemplateName 3-128 characters, pattern [a-zA-Z0-9\\(\\)\\.\\-/_]+",
    ),
    "ec2-create-security-group": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateSecurityGroup.html",
        shows="GroupName up to 255 characters",
    ),
    "ec2-create-placement-group": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreatePlacementGroup.html",
        shows="GroupName up to 255 ASCII characters",
    ),
    "ecr-create-repository": Source(
        url="https://docs.aws.amazon.com/AmazonECR/latest/APIReference/API_CreateRepository.html",
        shows="repositoryName 2-256 characters, lowercase, pattern "
        "(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*",
    ),
    "codebuild-create-project": Source(
        url="https://docs.aws.amazon.com/codebuild/latest/APIReference/API_CreateProject.html",
        shows="project name 2-255 characters, pattern [A-Za-z0-9][A-Za-z0-9\\-_]{1,254}",
    ),
    "s3-bucket-naming": Source(
        url="https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html",
        shows="bucket names 3-63 characters: lowercase letters, digits, dots and hyphens, starting and ending with a "
        "letter or digit",
    ),
    "logs-create-log-group": Source(
        url="https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html",
        shows="logGroupName 1-512 characters, pattern [\\.\\-_/#A-Za-z0-9]+",
    ),
    "kms-create-alias": Source(
        url="https://docs.aws.amazon.com/kms/latest/APIReference/API_CreateAlias.html",
        shows="AliasName 1-256 characters, pattern ^alias/[a-zA-Z0-9/_-]+$",
    ),
    "efs-create-file-system": Source(
        url="https://docs.aws.amazon.com/efs/latest/ug/API_CreateFileSystem.html",
        shows="CreationToken 1-64 characters",
    ),
    "helm-release-name": Source(
        url="https://github.com/helm/helm/blob/e9b85e4de16ad45805843fb121748018cf89094b/pkg/chart/v2/util/"
        "validate_name.go",
        shows="release names at most 53 characters (maxReleaseNameLen), lowercase letters, digits and '-' in "
        "dot-separated parts (the DNS-1123 subdomain form)",
    ),
    "helm-crds": Source(
        url="https://helm.sh/docs/chart_best_practices/custom_resource_definitions/",
        shows="CRDs in a chart's crds/ folder are installed with the chart and never upgraded or deleted by Helm "
        "(helm upgrade renders templates only: pkg/action/upgrade.go)",
    ),
    "pulumi-autonaming": Source(
        url="https://www.pulumi.com/docs/iac/concepts/resources/names/#autonaming",
        shows="an unnamed resource gets its logical name plus a random suffix (a hyphen and 7 characters)",
    ),
    "k8s-names": Source(
        url="https://kubernetes.io/docs/concepts/overview/working-with-objects/names/",
        shows="DNS subdomain names (253 characters), RFC 1123 label names (63), RFC 1035 label names (63, start with a "
        "letter; Services)",
    ),
    "k8s-job-name": Source(
        url="https://kubernetes.io/docs/concepts/workloads/controllers/job/",
        shows="a Job's name should be a DNS label and must be no longer than 63 characters; an Indexed Job's pod "
        "hostname is $(job-name)-$(index)",
    ),
    "k8s-statefulset": Source(
        url="https://kubernetes.io/docs/concepts/workloads/controllers/statefulset/",
        shows="the name of a StatefulSet must be a valid DNS label",
    ),
    "k8s-labels": Source(
        url="https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set",
        shows="label values at most 63 characters, alphanumerics with -, _ and . inside",
    ),
    "k8s-container-port": Source(
        url="https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#ports",
        shows="a container port name is an IANA_SVC_NAME: at most 15 characters",
    ),
    # --- FSx for Lustre ---------------------------------------------------------------------------
    "fsx-api-create-file-system": Source(
        url="https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html",
        shows="StorageCapacity of PERSISTENT_2 SSD: 1200 GiB, 2400 GiB, and increments of 2400 GiB; "
        "FileSystemTypeVersion 2.15 is recommended for all new file systems and the default for PERSISTENT_2 with a "
        "metadata configuration",
    ),
    "fsx-api-lustre-configuration": Source(
        url="https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystemLustreConfiguration.html",
        shows="PerUnitStorageThroughput for PERSISTENT_2 SSD: 125, 250, 500, 1000 MB/s/TiB; DataCompressionType "
        "NONE|LZ4; EfaEnabled; ImportPath/ExportPath/AutoImportPolicy not supported on PERSISTENT_2 (use data "
        "repository associations)",
    ),
    "fsx-api-metadata-configuration": Source(
        url="https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystemLustreMetadataConfiguration.html",
        shows="Mode AUTOMATIC|USER_PROVISIONED; SSD Iops 1500, 3000, 6000, 12000 and multiples of 12000 up to 192000",
    ),
    "fsx-metadata-performance": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/performance.html#dne-metadata-performance",
        shows="AUTOMATIC mode's metadata IOPS for SSD: 1500 at 1.2 TiB, 3000 at 2.4 TiB, 6000 from 4.8 to 9.6 TiB, "
        "12000 from 12 to 45.6 TiB, 12000 per 24 TiB from 48 TiB",
    ),
    "fsx-metadata-growth": Source(
        url="https://github.com/hashicorp/terraform-provider-aws/issues/44432",
        shows="FSx refuses to grow a USER_PROVISIONED file system from 1200 to 2400 GiB until its metadata IOPS are at "
        "least 3000, AUTOMATIC's for 2400 GiB; the provider updates the metadata first since pull request 44456",
    ),
    "fsx-increase-storage": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/increase-storage-capacity.html",
        shows="EFA-enabled file systems are multiples of 38400 GiB at 125 MB/s/TiB, 19200 at 250, 9600 at 500 and "
        "4800 at 1000",
    ),
    "fsx-efa": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/efa-file-systems.html",
        shows="EFA-enabled file systems (PERSISTENT_2 with a metadata configuration, set at creation, clients with "
        "EFA); recommended above 10 GBps of throughput capacity",
    ),
    "fsx-efa-security-group": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/cannot-create-fs.html",
        shows="an EFA file system needs a security group allowing all inbound and outbound traffic to and from "
        "itself and the clients' security group; Lustre needs inbound TCP 988 and 1018-1023",
    ),
    "fsx-lustre-security-groups": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html",
        shows="Lustre traffic on TCP 988 and 1018-1023 between the file servers and from the Lustre clients "
        "(inbound, and outbound when egress is restricted)",
    ),
    "fsx-dra": Source(
        url="https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateDataRepositoryAssociation.html",
        shows="at most 8 data repository associations per file system; each with a unique file-system directory "
        "and a unique S3 bucket or prefix; auto import/export events NEW, CHANGED, DELETED; DataRepositoryPath "
        "s3://bucket/prefix/ (3-900 characters), FileSystemPath starting with / (up to 4096)",
    ),
    "tf-fsx-lustre-timeouts": Source(
        url="https://registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/fsx_lustre_file_system#timeouts",
        shows="aws_fsx_lustre_file_system waits 30 minutes by default for a create, an update and a delete; an "
        "update waits until the file system is AVAILABLE and its FILE_SYSTEM_UPDATE action completed or optimizing "
        "(internal/service/fsx/lustre_file_system.go)",
    ),
    "fsx-throughput-change": Source(
        url="https://docs.aws.amazon.com/ja_jp/fsx/latest/LustreGuide/managing-throughput-capacity.html",
        shows="a new throughput tier makes FSx switch the SSD file system's file servers; while the throughput "
        "scales, the file system can be unavailable for up to an hour (the guide's current edition, machine-translated "
        "from the English one; the English how-to page says a very brief period)",
    ),
    "tf-fsx-dra-timeouts": Source(
        url="https://registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/fsx_data_repository_association#timeouts",
        shows="aws_fsx_data_repository_association waits 10 minutes by default for a create, an update and a delete "
        "(internal/service/fsx/data_repository_association.go: until the association is AVAILABLE)",
    ),
    "fsx-dra-import-outlasts-default": Source(
        url="https://github.com/aws-samples/amazon-eks-machine-learning-with-terraform-and-kubeflow/issues/112",
        shows="an S3 import/export data repository association created through Terraform outlasted the 10-minute "
        "default wait without an error in its creation; the project raised the wait to 30 minutes",
    ),
    "fsx-import-millions-of-objects": Source(
        url="https://github.com/aws/aws-parallelcluster/issues/4211",
        shows="an FSx for Lustre file system importing an S3 bucket of more than 4 million objects took over an "
        "hour to create, under 20 minutes for a small bucket",
    ),
    "fsx-quotas": Source(
        url="https://docs.aws.amazon.com/fsx/latest/LustreGuide/limits.html",
        shows="total Lustre storage for all file systems, default 100,800 GiB per Region; Service Quotas code "
        "L-8F1B9C74 (Lustre Persistent_2 storage capacity) under service code fsx "
        "(https://console.aws.amazon.com/servicequotas/home/services/fsx/quotas)",
    ),
    "fsx-lustre-pricing": Source(
        url="https://aws.amazon.com/fsx/lustre/pricing/",
        shows="storage billed per GB-month of provisioned capacity; PERSISTENT_2 SSD in us-east-1: $0.145 at "
        "125 MB/s/TiB, $0.210 at 250, $0.340 at 500, $0.600 at 1000; AUTOMATIC metadata included",
    ),
    "fsx-lustre-price-125": Source(
        url="https://c3x.dev/resources/aws/aws_fsx_lustre_file_system/",
        shows="third-party cross-check: ~$0.145/GB-month for SSD at 125 MB/s/TiB (1.2 TB is ~$174/month)",
    ),
    "eks-fsx-csi-addon": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html",
        shows="the Amazon FSx CSI driver as the EKS add-on aws-fsx-csi-driver, authenticated through EKS Pod Identity",
    ),
    "fsx-csi-chart-values": Source(
        url="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/5b227125add708cd0b87c76abe1a4c074e71dfc5/"
        "charts/aws-fsx-csi-driver/values.yaml",
        shows="controller service account fsx-csi-controller-sa, node service account fsx-csi-node-sa; the node "
        "DaemonSet tolerates all taints (GPU nodes included)",
    ),
    "fsx-csi-static-pv": Source(
        url="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/tree/5b227125add708cd0b87c76abe1a4c074e71dfc5/"
        "examples/kubernetes/static_provisioning",
        shows="a static PersistentVolume: driver fsx.csi.aws.com, volumeHandle = file system id, volumeAttributes "
        "dnsname and mountname, mountOptions [flock], a claim with storageClassName \"\" and volumeName",
    ),
    "fsx-csi-iam": Source(
        url="https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/5b227125add708cd0b87c76abe1a4c074e71dfc5/"
        "pkg/cloud/cloud.go",
        shows="the controller polls fsx:DescribeFileSystems every minute; CreateFileSystem, DeleteFileSystem and "
        "UpdateFileSystem are only called for dynamic provisioning and expansion (a static volume needs none)",
    ),
    "eks-aiml-storage": Source(
        url="https://docs.aws.amazon.com/eks/latest/best-practices/aiml-storage.html",
        shows="FSx for Lustre for multi-instance, latency-sensitive, high-bandwidth training with S3 integration, in "
        "the zone of the GPU nodes; EFS for moderate-performance shared access across zones",
    ),
    "efs-pricing": Source(
        url="https://aws.amazon.com/efs/pricing/",
        shows="EFS is billed by use: GB-month stored and, with Elastic throughput, GB read and written",
    ),
    "busybox-image": Source(
        url="https://github.com/kubernetes/k8s.io/blob/e10ab5f95c9786e66745737e865fd6f593358eae/registry.k8s.io/"
        "images/k8s-staging-e2e-test-images/images.yaml",
        shows="registry.k8s.io/e2e-test-images/busybox:1.37.0-1 and its digest sha256:0ffbe172f8d2...6c8bb (the "
        "Kubernetes image promoter's manifest; the tag Kubernetes' own e2e tests run, test/utils/image/manifest.go)",
    ),
    # --- charts and images ------------------------------------------------------------------------
    "nvidia-device-plugin-chart": Source(
        url="https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/deployments/helm/nvidia-device-plugin/Chart.yaml",
        shows="chart nvidia-device-plugin 0.20.0 (repo https://nvidia.github.io/k8s-device-plugin)",
    ),
    "efa-device-plugin-chart": Source(
        url="https://github.com/aws/eks-charts/blob/bfe91c4b9257c80f754ad4b3d6a9a3c239b2b8ec/stable/"
        "aws-efa-k8s-device-plugin/Chart.yaml",
        shows="chart aws-efa-k8s-device-plugin v0.5.30 (repo https://aws.github.io/eks-charts)",
    ),
    "cluster-autoscaler-chart": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-chart-9.59.0/cluster-autoscaler/charts/cluster-autoscaler/templates/clusterrole.yaml",
        shows="chart cluster-autoscaler (repo https://kubernetes.github.io/autoscaler), appVersion per chart version "
        "(9.46.6: 1.32, 9.51.0: 1.33, 9.53.0: 1.34, 9.59.0: 1.35); volumeattachments in the ClusterRole from 9.46.3",
    ),
    "cluster-autoscaler-releases": Source(
        url="https://github.com/kubernetes/autoscaler/releases",
        shows="cluster-autoscaler image tags per Kubernetes minor (the autoscaler's minor must match the cluster's)",
    ),
    "cluster-autoscaler-images": Source(
        url="https://github.com/soltysh/k8s.io/blob/2d7cc8e89cca59e421813e3ff8aa943400dddd3c/registry.k8s.io/images/"
        "k8s-staging-autoscaling/images.yaml",
        shows="the Kubernetes image promoter's manifest for registry.k8s.io/autoscaling, in a fork of "
        "kubernetes/k8s.io (upstream: registry.k8s.io/images/k8s-staging-autoscaling/images.yaml on main), `name: "
        "cluster-autoscaler` (the multi-arch index per tag; the -amd64/-arm64/-s390x entries are the per-platform "
        "images): v1.32.7 sha256:b3a6d87dbd23...8eb06, v1.33.6 sha256:7b44e0f075b2...6ec51, "
        "v1.34.5 sha256:5c3a56440ffc...9a266, v1.35.2 sha256:aac369dc2839...b887d, "
        "v1.36.1 sha256:461388d03eb5...994b4; kubernetes/k8s.io at commit e10ab5f95c9786e66745737e865fd6f593358eae has "
        "the same v1.32.7 line. Every pinned chart's templates/deployment.yaml writes "
        '`image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"` (kubernetes/autoscaler tags '
        "cluster-autoscaler-chart-9.46.6, 9.51.0, 9.53.0, 9.59.0)",
    ),
    "nvidia-device-plugin-image": Source(
        url="https://github.com/NVIDIA/gpu-operator/blob/a22dbf671f2e26f9a1e342f8eea28e196235e110/bundle/manifests/"
        "gpu-operator-certified.clusterserviceversion.yaml",
        shows="NVIDIA's GPU Operator bundle: relatedImages device-plugin-image "
        "nvcr.io/nvidia/k8s-device-plugin:v0.20.0@sha256:a61ba9fd8efb...c3312 (commit 504b7f1a 'Update "
        "nvcr.io/nvidia/k8s-device-plugin to v0.20.0'); the chart nvidia-device-plugin 0.20.0 (appVersion 0.20.0) "
        "renders `repository:tag`, the tag defaulting to v + appVersion "
        "(NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/templates/_helpers.tpl)",
    ),
    "kueue-image": Source(
        url="https://github.com/kubernetes-sigs/kueue/issues/13894",
        shows="Release v0.19.1: the release's image us-central1-docker.pkg.dev/k8s-staging-images/kueue/kueue:v0.19.1 "
        "at sha256:7a2204a64388...f9f8f, which kubernetes/k8s.io#9831 'Kueue: Promote v0.19.1' promotes by digest to "
        "registry.k8s.io/kueue/kueue:v0.19.1 (with the chart charts/kueue 0.19.1 at sha256:b8d0ba07db35...f7642); the "
        "chart's manager template writes `repository:tag` (kubernetes-sigs/kueue v0.19.1 "
        "charts/kueue/templates/manager/manager.yaml)",
    ),
    "ca-provreq-best-effort-atomic": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/provisioningrequest/"
        "besteffortatomic/provisioning_class.go",
        shows="the best-effort-atomic-scale-up ProvisioningRequest class requests the scale-up for all the request's "
        "pods at once and marks it Provisioned right after the request, 'without waiting to verify that resources "
        "started'; the scale-up uses the node group's AtomicIncreaseSize and falls back to IncreaseSize where it is "
        "not implemented (core/scaleup/orchestrator/executor.go)",
    ),
    "ca-provisioning-request-crd": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/apis/config/crd/"
        "autoscaling.x-k8s.io_provisioningrequests.yaml",
        shows="the ProvisioningRequest CRD (autoscaling.x-k8s.io v1, served and stored; v1beta1 deprecated) at the "
        "cluster-autoscaler 1.36.1 release tag; the classes and conditions in apis/provisioningrequest/"
        "autoscaling.x-k8s.io/v1/types.go at the same tag",
    ),
    "ca-provisioning-request-flags": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/config/flags/"
        "flags.go",
        shows="--enable-provisioning-requests (default false), --provisioning-request-initial-backoff-time 1m and "
        "--provisioning-request-max-backoff-time 10m (retry of a request whose scale-up failed); the autoscaler "
        "lists and watches ProvisioningRequests and PodTemplates and updates the requests' status "
        "(provisioningrequest/provreqclient/client.go)",
    ),
    "ca-provreq-booking": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/processors/"
        "provreq/processor.go",
        shows="a Provisioned request's capacity is booked for 10 minutes (defaultReservationTime), then "
        "BookingExpired; a request not Provisioned within 7 days (defaultExpirationTime) gets Failed=True (Expired); "
        "processors/provreq/injector.go retries a Provisioned=False request after 1 min doubling to 10 min",
    ),
    "kueue-provisioning-check": Source(
        url="https://kueue.sigs.k8s.io/docs/admission-check-controllers/provisioning/",
        shows="Kueue's ProvisioningRequest admission check: AdmissionCheck with controllerName "
        "kueue.x-k8s.io/provisioning-request naming a ProvisioningRequestConfig (provisioningClassName, "
        "managedResources, retryStrategy); Kueue creates the request with PodTemplates of the pod sets once quota is "
        "reserved and admits when it is Provisioned (pkg/controller/admissionchecks/provisioning/controller.go at "
        "v0.19.1); the controller runs only when the ProvisioningRequest CRD exists at the manager's start "
        "(cmd/kueue/main.go, ServerSupportsProvisioningRequest)",
    ),
    "kueue-second-pass-fix": Source(
        url="https://github.com/kubernetes-sigs/kueue/pull/11039",
        shows="[release-0.17] fix: Seed second-pass with all prior flavors: the seed loop in "
        "flavorassigner.assignFlavors copied just the first preexisting flavor per PodSet; for multi-resource "
        "workloads on the second pass the remaining resources fell through to fitsResourceQuota, which double-counts "
        "the workload's own first-pass reservation (first in tag v0.17.3; issue kubernetes-sigs/kueue#9048)",
    ),
    "ca-provreq-json": Source(
        url="https://github.com/kubernetes/autoscaler/pull/9546",
        shows="'Use application/json for ProvisioningRequest client config': the ProvisioningRequest client inherited "
        "the autoscaler's global REST configuration (protobuf by default), so it only worked with "
        "--kube-api-content-type set to JSON; a ProvisioningRequest (a CRD) 'does not implement the protobuf "
        "marshalling interface' and the Accepted condition is never written (issue kubernetes/autoscaler#8855); "
        "cherry-picked to cluster-autoscaler-release-1.33, 1.34 and 1.35 as #10014, #10015 and #10016 (in 1.33.6, "
        "1.34.5, 1.35.2: main.go sets restConfig.ContentType to application/json; 1.36.1: builder/clients.go); "
        "none to 1.32, whose last release is 1.32.7",
    ),
    "ca-aws-atomic-increase": Source(
        url="https://github.com/kubernetes/autoscaler/blob/cluster-autoscaler-1.36.1/cluster-autoscaler/cloudprovider/aws/"
        "aws_cloud_provider.go",
        shows="AwsNodeGroup.AtomicIncreaseSize returns cloudprovider.ErrNotImplemented (an Auto Scaling group is "
        "scaled by setting its desired size: it may launch part of it)",
    ),
    "etcd-image": Source(
        url="https://github.com/kubernetes/k8s.io/blob/042770b5870a67fada1d4c48ed9679b10dcb9ca2/registry.k8s.io/"
        "images/k8s-staging-etcd/images.yaml",
        shows="registry.k8s.io/etcd:3.5.21-0 and its digest sha256:d58c035df557...7d121 (the Kubernetes image "
        "promoter's manifest)",
    ),
    "etcd-v2-rendezvous": Source(
        url="https://github.com/aws-samples/awsome-distributed-training/blob/7217859f67bc693c52ff175ccc6082c41dbd7a1b/"
        "3.test_cases/pytorch/ddp/kubernetes/ddp-custom-container.yaml-template",
        shows="AWS's torchrun etcd rendezvous: quay.io/coreos/etcd:v3.5.19 with --enable-v2 (etcd 3.5 is the last "
        "release with the v2 API, https://etcd.io/docs/v3.5/upgrades/upgrade_3_6/)",
    ),
    "mpi-operator": Source(
        url="https://github.com/kubeflow/mpi-operator/blob/v0.8.0/deploy/v2beta1/mpi-operator.yaml",
        shows="the MPI Operator's release manifest (MPIJob v2beta1 CRD, RBAC, Deployment of "
        "mpioperator/mpi-operator:0.8.0); MPIJob fields in pkg/apis/kubeflow/v2beta1/types.go at the same tag",
    ),
    "mpi-operator-env": Source(
        url="https://github.com/kubeflow/mpi-operator/blob/v0.8.0/pkg/controller/mpi_job_controller.go",
        shows="the operator appends K_MPI_JOB_ROLE (launcher or worker) to the containers of an MPIJob's launcher and "
        "workers",
    ),
    "kueue-chart-values": Source(
        url="https://github.com/kubernetes-sigs/kueue/blob/v0.19.1/charts/kueue/values.yaml",
        shows="controllerManager.replicas is 1 and podDisruptionBudget.enabled false by default; the chart's "
        "templates/webhook/manifests.yaml gives the webhooks of batch/v1 Jobs and MPIJobs (mjob.kb.io, vjob.kb.io, "
        "mmpijob.kb.io) failurePolicy: Fail in every namespace but kube-system and Kueue's own",
    ),
    "kueue-chart": Source(
        url="https://kueue.sigs.k8s.io/docs/installation/#install-via-helm",
        shows="Kueue's Helm chart oci://registry.k8s.io/kueue/charts/kueue at version 0.19.1 (the chart's sources are "
        "charts/kueue of https://github.com/kubernetes-sigs/kueue/tree/v0.19.1; its values take the manager's "
        "Configuration as managerConfig.controllerManagerConfigYaml)",
    ),
    "ec2-instance-topology-prerequisites": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html",
        shows="the instance types DescribeInstanceTopology describes: 3 network nodes for p3dn.24xlarge, p4d.24xlarge, "
        "p4de.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p6e-gb200.36xlarge, g6e.*, g7e.*, hpc*, trn1/trn1n/"
        "trn2/trn2u; 4 for p6-b200.48xlarge and p6-b300.48xlarge; and the AWS Regions that offer it",
    ),
    "ec2-instance-topology": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html",
        shows="the network as a hierarchy of layers; an instance's node set lists one network node per layer from the "
        "top down, the last one the node the instance connects to; instances that share it are closest",
    ),
    "eks-ml-workload-topology": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html",
        shows="EKS labels each node with its place in that hierarchy: topology.k8s.aws/network-node-layer-1 (top) to "
        "-3, and -4 on types with four layers (the bottom layer there); usable by the scheduler and by Kueue's "
        "topology-aware scheduling",
    ),
    "cloud-provider-aws-topology-labels": Source(
        url="https://github.com/kubernetes/cloud-provider-aws/blob/63ec440c3275321b55afa45480e2fdfd2b0e93c4/pkg/"
        "providers/v1/instances_v2.go",
        shows="getAdditionalLabels: the AWS cloud controller manager calls ec2:DescribeInstanceTopology for a "
        "registering node and adds topology.k8s.aws/network-node-layer-<n> per network node (none when EC2 returns "
        "no topology, the region is unsupported or the call is not authorized; pkg/providers/v1/topology.go); since "
        "releases v1.30.8, v1.31.x and v1.32.0",
    ),
    "kueue-tas-node-failure": Source(
        url="https://github.com/kubernetes-sigs/kueue/blob/v0.19.1/pkg/controller/tas/node_controller.go",
        shows="a node a topology-placed workload uses is failed for it once its pod there ends on a tainted node "
        "(a cordon or drain) or the node is deleted; the scheduler then looks for a replacement node (any schedulable "
        "node of the flavor for a preferred topology: pkg/cache/scheduler/tas_flavor_snapshot.go, "
        "requiredReplacementDomain; cordoned nodes are not among them: tas_nodes_cache.go), and with "
        "TASFailedNodeReplacementFailFast (beta, on by default since v0.14: pkg/features/kube_features.go) evicts the "
        "whole workload when it finds none at once (pkg/scheduler/scheduler.go, "
        "evictWorkloadAfterFailedTASReplacement); a second node failing before the first is replaced evicts it too",
    ),
    "kueue-recovery-timeout": Source(
        url="https://github.com/kubernetes-sigs/kueue/blob/v0.19.1/apis/config/v1beta2/defaults.go",
        shows="waitForPodsReady.recoveryTimeout defaults to its timeout; a running workload one of whose pods stopped "
        "being Ready waits for recovery, and past that time Kueue evicts it whole and requeues it "
        "(pkg/controller/core/workload_controller.go, reconcileNotReadyTimeout; apis/config/v1beta2/"
        "configuration_types.go: Defaults to the value of timeout)",
    ),
    "kueue-tas": Source(
        url="https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/",
        shows="Kueue's topology-aware scheduling (beta, on by default since v0.14): a Topology's levels are node "
        "labels (kubernetes.io/hostname only as the lowest), a ResourceFlavor names it in topologyName; a pod "
        "template's kueue.x-k8s.io/podset-preferred-topology asks for one domain of that level, then the levels above, "
        "else spread; podset-required-topology refuses to admit otherwise; only Ready, schedulable nodes that carry "
        "every level's label count (pkg/util/tas/node.go NodeMatchesFlavor at v0.19.1)",
    ),
    # --- image builds -------------------------------------------------------------------------------
    "cuda-12.9.1-devel-digest": Source(
        url="https://hub.docker.com/r/nvidia/cuda/tags?name=12.9.1-devel-ubuntu22.04",
        shows="nvidia/cuda:12.9.1-devel-ubuntu22.04: index digest sha256:bd4e2680a261...b5ba8 (linux/amd64 manifest "
        "sha256:38804006c937...30bd3); NVIDIA publishes the same CUDA images on nvcr.io "
        "(https://catalog.ngc.nvidia.com/orgs/nvidia/containers/cuda/tags). The same index digest is pinned for the "
        "Docker Hub tag by an independent public Dockerfile (source key ``cuda-12.9.1-devel-digest-pin``); no public "
        "source seen pins the nvcr.io name to it",
    ),
    "cuda-12.9.1-devel-digest-pin": Source(
        url="https://github.com/Nier4Ryu/putpocket_dataset_mining/blob/3076015a0b4a3e725105135a0fe064627fee4bdb/"
        "cloud/runpod/Dockerfile.dev-base",
        shows="FROM --platform=linux/amd64 nvidia/cuda:12.9.1-devel-ubuntu22.04@sha256:bd4e2680a261...b5ba8 (its "
        "base-image contract also names the amd64 manifest sha256:38804006c937...30bd3)",
    ),
    "ngc-tensorflow-25.02-digest": Source(
        url="https://github.com/zachtheyek/Aetherscan/blob/bc6cfe26632f5092b9c0e61a741b0dda2ccc6cb2/aetherscan.def",
        shows="an independent public recipe pins nvcr.io/nvidia/tensorflow:25.02-tf2-py3@sha256:c83b37d26f19...f75d5 "
        "(NGC's tag list, https://catalog.ngc.nvidia.com/orgs/nvidia/containers/tensorflow/tags, needs a browser); "
        "whether that is the multi-arch index or the amd64 manifest is not shown: either pulls the amd64 image",
    ),
    "ngc-25.01-gpu-requirements": Source(
        url="https://github.com/triton-inference-server/server/blob/d3ee577e403a445fb69db3e8e5a641f9a6765650/"
        "docs/introduction/release_notes.md#L113-L121",
        shows="NVIDIA's release notes of its NGC containers' release 25.01 (CUDA 12.8.0), GPU Requirements: \"Release "
        "25.01 supports CUDA compute capability 7.5 and later. This corresponds to GPUs in the NVIDIA Turing, NVIDIA "
        "Ampere architecture, NVIDIA Hopper, NVIDIA Ada Lovelace, and NVIDIA Blackwell architecture families.\" The "
        "same file for release 24.12 (commit 38520f6d0479, line 87) still reads \"6.0 and later ... Pascal, NVIDIA "
        "Volta ...\". Every NGC framework release note carries this paragraph for its release; the TensorFlow 25.02 "
        "container's own (https://docs.nvidia.com/deeplearning/frameworks/tensorflow-release-notes/rel-25-02.html, "
        "CUDA 12.8.0) could not be read offline, and no public source seen states a lower compute capability for it",
    ),
    "efa-installer-apt": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html",
        shows="before running efa_installer.sh on Ubuntu, update the package index (sudo apt-get update); the "
        "installer installs its dependencies from the distribution's repositories. AWS's own nccl-tests image keeps "
        "the index until after the installer (https://github.com/aws-samples/awsome-distributed-training/blob/"
        "7217859f67bc693c52ff175ccc6082c41dbd7a1b/micro-benchmarks/nccl-tests/nccl-tests.Dockerfile: apt-get update "
        "first, rm -rf /var/lib/apt/lists/* last)",
    ),
    "ubuntu-24.04-digest": Source(
        url="https://github.com/aws/deep-learning-containers/blob/e0ecedea6a1c56d6b5914f9cfb2fec5c548e67e0/"
        "docker/sklearn/1.4-2-py312/Dockerfile#L16",
        shows="AWS pins ubuntu:24.04 (the Docker Official Image) to index digest sha256:b359f1067efa...9006b; ECR "
        "Public mirrors that image as public.ecr.aws/docker/library/ubuntu (https://gallery.ecr.aws/docker/library/ubuntu)",
    ),
    "docker-hub-limits": Source(
        url="https://docs.docker.com/docker-hub/usage/",
        shows="Docker Hub limits unauthenticated pulls per IPv4 address or IPv6 /64 subnet",
    ),
    "codebuild-docker-hub-429": Source(
        url="https://dev.classmethod.jp/en/articles/codebuild-docker-hub-429-ecr-public-gallery-workaround",
        shows="CodeBuild reaches Docker Hub from AWS-managed addresses shared with other users, so its anonymous "
        "pulls fail with 429 Too Many Requests; ECR Public's docker/library images avoid it",
    ),
    "ecr-public-pulls": Source(
        url="https://docs.aws.amazon.com/AmazonECR/latest/public/docker-pull-ecr-image.html",
        shows="ECR Public accepts unauthenticated and authenticated pulls, with separate quotas for each "
        "(https://docs.aws.amazon.com/AmazonECR/latest/public/public-service-quotas.html)",
    ),
    "ecr-public-login": Source(
        url="https://docs.aws.amazon.com/cli/latest/reference/ecr-public/get-login-password.html",
        shows="aws ecr-public get-login-password (us-east-1) needs ecr-public:GetAuthorizationToken and "
        "sts:GetServiceBearerToken; the token authenticates pulls from ECR Public",
    ),
    "codebuild-shell": Source(
        url="https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-cmd.html",
        shows="buildspec version 0.2 keeps the state of earlier commands (directory, environment variables) for "
        "later ones; 0.1 ran each command in its own shell",
    ),
    "codebuild-buildspec": Source(
        url="https://docs.aws.amazon.com/codebuild/latest/userguide/build-spec-ref.html",
        shows="buildspec syntax: env.shell, env.variables, phases; commands run as root unless run-as names a user",
    ),
    "eks-ami-v20260610": Source(
        url="https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260610",
        shows="AMI Release v20260610: the release versions of the AL2023 AMIs (standard and NVIDIA share them) for "
        "Kubernetes 1.32 to 1.36: "
        "1.32.13-20260610, 1.33.12-20260610, 1.34.8-20260610, 1.35.5-20260610, 1.36.1-20260610; "
        "kmod-nvidia-latest-dkms 580.159.03 in the AL2023_x86_64_NVIDIA AMIs",
    ),
    "eks-ami-v20260618": Source(
        url="https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260618",
        shows="AMI Release v20260618: the release versions of the AL2023 AMIs (standard and NVIDIA share them) for "
        "Kubernetes 1.32 to 1.36: "
        "1.32.13-20260618, 1.33.13-20260618, 1.34.9-20260618, 1.35.6-20260618, 1.36.2-20260618; "
        "kmod-nvidia-latest-dkms 580.159.03 in the AL2023_x86_64_NVIDIA AMIs",
    ),
    "eks-ami-v20260625": Source(
        url="https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260625",
        shows="AMI Release v20260625: the release versions of the AL2023 AMIs (standard and NVIDIA share them) for "
        "Kubernetes 1.32 to 1.36: "
        "1.32.13-20260625, 1.33.13-20260625, 1.34.9-20260625, 1.35.6-20260625, 1.36.2-20260625; "
        "kmod-nvidia-latest-dkms 580.159.03 in the AL2023_x86_64_NVIDIA AMIs",
    ),
    "eks-ami-v20260714": Source(
        url="https://github.com/awslabs/amazon-eks-ami/releases/tag/v20260714",
        shows="AMI Release v20260714: the release versions of the AL2023 AMIs (standard and NVIDIA share them) for "
        "Kubernetes 1.32 to 1.36: "
        "1.32.13-20260714, 1.33.13-20260714, 1.34.9-20260714, 1.35.6-20260714, 1.36.2-20260714; "
        "kmod-nvidia-latest-dkms 580.159.03 in the AL2023_x86_64_NVIDIA AMIs",
    ),
    "eks-ami-two-drivers": Source(
        url="https://github.com/awslabs/amazon-eks-ami/issues/2768",
        shows="a maintainer's answer (2026-09-21): from release v20260917 \"the EKS AMIs now include two NVIDIA driver "
        "versions and select the correct one based on the instance type at first boot\", pointing to "
        "https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html#eks-amis-nvidia-al2023",
    ),
    "cuda-driver-compatibility": Source(
        url="https://docs.nvidia.com/deploy/cuda-compatibility/",
        shows="minor version compatibility: applications built with CUDA 13.x run on drivers >= 580, with CUDA 12.x "
        "on drivers >= 525.60.13",
    ),
    "eks-managed-node-update": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html",
        shows="a managed node group update: setup (a new launch template version, maxUnavailable from updateConfig), "
        "scale up (the Auto Scaling group's maximum and desired sizes raised by the larger of up to twice its "
        "Availability Zones and maxUnavailable, up to two instances per zone; new nodes in every zone, labelled "
        "eks.amazonaws.com/nodegroup=$nodeGroupName; then "
        "it marks nodes as unschedulable to avoid scheduling new Pods), upgrade (up to maxUnavailable nodes "
        "drained at once with the eviction API; a pod that cannot be evicted within 15 minutes fails the update "
        "with PodEvictionFailure unless the update is forced, which deletes the pods), scale down; with the minimal "
        "update strategy each node is drained, cordoned and terminated before the Auto Scaling group launches its "
        "replacement, capacity never above the configured quantity, the same 15-minute eviction rule",
    ),
    "eks-nodegroup-update-config": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupUpdateConfig.html",
        shows="NodegroupUpdateConfig: maxUnavailable (default one node) and updateStrategy, DEFAULT | MINIMAL: the "
        "default strategy launches the new instances first, before terminating the old instances; the minimal "
        "strategy terminates the old instances before launching the new ones, for capacity-constrained groups "
        "(GPUs)",
    ),
    "eks-capacity-blocks-mng": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html",
        shows="a managed node group with a Capacity Block: the launch template's capacity-block market and "
        "reservation; the group's size follows the block; upgrade a Capacity Block group at desired size 0",
    ),
    "ec2-capacity-reservation-launch": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html",
        shows="an instance launches into a Capacity Reservation only while it has matching attributes, sufficient "
        "available capacity and is active; each launch reduces the available capacity",
    ),
    "ec2-placement-strategies": Source(
        url="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html",
        shows="cluster placement groups: launch the instances needed in a single request; adding more instances "
        "later increases the chance of an insufficient capacity error",
    ),
    "eks-delete-managed-node-group": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/delete-managed-node-group.html",
        shows="deleting a managed node group drains each node before its instance goes (SIGTERM, then each pod's "
        "terminationGracePeriodSeconds); a node not drained after 5 minutes is terminated anyway",
    ),
    "eks-ami-graceful-shutdown": Source(
        url="https://github.com/awslabs/amazon-eks-ami/pull/2390",
        shows="EKS's AL2023 AMIs for Kubernetes 1.34 and later set the kubelet's graceful node shutdown: 150 s in "
        "all, the last 30 s for critical pods, so other pods get at most 120 s when their node shuts down",
    ),
    "tf-eks-node-group-timeouts": Source(
        url="https://registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/eks_node_group#timeouts",
        shows="aws_eks_node_group waits 60 minutes by default for a create, an update and a delete; a failed version "
        "update ends the wait with an error (internal/service/eks/node_group.go, waitNodegroupUpdateSuccessful)",
    ),
    "tf-eks-node-group-update-order": Source(
        url="https://github.com/hashicorp/terraform-provider-aws/blob/012e0a32f0686212f447447fd3d81c3d0ce256ad/"
        "internal/service/eks/node_group.go",
        shows="resourceNodeGroupUpdate: \"Do any version update first\": a launch template, release_version or "
        "version change is sent (UpdateNodegroupVersion) and waited for before labels, scaling, taints and "
        "update_config (UpdateNodegroupConfig)",
    ),
    "pulumi-ignore-changes": Source(
        url="https://www.pulumi.com/docs/iac/concepts/options/ignorechanges/",
        shows="an ignored property keeps the value from Pulumi's state: skipping the refresh step leaves stale values "
        "in the state, and Pulumi sends them to the provider in later updates (the engine copies the old inputs into "
        "the ignored paths: pulumi/pulumi pkg/resource/deploy/step_generator.go, processIgnoreChanges); a refresh "
        "reads a Terraform-bridged resource's inputs back from the cloud (pulumi/pulumi-terraform-bridge "
        "pkg/tfbridge/provider.go, Read, ExtractInputsFromOutputs)",
    ),
    "eks-scaling-config": Source(
        url="https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html",
        shows="desiredSize: if it is smaller than the current number of running nodes, the necessary number of nodes "
        "are terminated to match it; Terraform's aws_eks_node_group sends the whole scaling_config (desired_size "
        "included) when any of its sizes changes (internal/service/eks/node_group.go, resourceNodeGroupUpdate); EKS "
        "does not respect PodDisruptionBudgets when it reduces the desired node count (EKS user guide, "
        "managed-node-groups.html)",
    ),
    "eks-update-managed-node-group": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html",
        shows="a managed node group is updated to a Kubernetes version or an AMI release version (releaseVersion); "
        "the node group's Kubernetes version cannot be newer than the control plane's; force respects no "
        "PodDisruptionBudget",
    ),
    "kubernetes-service-variables": Source(
        url="https://kubernetes.io/docs/concepts/containers/container-environment/#cluster-information",
        shows="a container gets FOO_SERVICE_HOST and FOO_SERVICE_PORT for each Service of its namespace when it "
        "starts (Docker links variables too: FOO_PORT, FOO_PORT_<port>_<PROTOCOL>...; "
        "https://kubernetes.io/docs/concepts/services-networking/service/#environment-variables)",
    ),
    "nvidia-device-plugin-env": Source(
        url="https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/README.md",
        shows="the device plugin passes the GPUs it allocates to a container as NVIDIA_VISIBLE_DEVICES (its default "
        "device list strategy, envvar)",
    ),
    "torchrun-environment": Source(
        url="https://docs.pytorch.org/docs/stable/elastic/run.html#environment-variables",
        shows="the variables torchrun sets in each worker process: LOCAL_RANK, RANK, GROUP_RANK, ROLE_RANK, "
        "ROLE_NAME, LOCAL_WORLD_SIZE, WORLD_SIZE, GROUP_WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, "
        "TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID (set by "
        "torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers)",
    ),
    "openmpi-environment": Source(
        url="https://www.open-mpi.org/doc/v4.1/man1/mpirun.1.php",
        shows="Open MPI 4.1's mpirun(1), section Exported Environment Variables: OMPI_COMM_WORLD_SIZE, "
        "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE, OMPI_COMM_WORLD_NODE_RANK, "
        "OMPI_UNIVERSE_SIZE in every MPI process (Open MPI 5's docs list the same: "
        "https://docs.open-mpi.org/en/v5.0.x/tuning-apps/environment-var.html)",
    ),
    "torch-2.13.0": Source(
        url="https://pypi.org/project/torch/2.13.0/",
        shows="the Linux x86_64 wheels of torch 2.13.0 are the CUDA 13.0 build (2.13.0+cu130: torch.version.cuda "
        "13.0) and require nvidia-nccl-cu13==2.29.7 and nvidia-cuda-runtime 13.0 (libcudart.so.13 in "
        "site-packages/nvidia/cu13/lib); installed, torch._C._cuda_getArchFlags() prints sm_75 sm_80 sm_86 sm_90 "
        "sm_100 sm_120 (tests/unit/test_torch_pin.py reads it from the wheel the tests run)",
    ),
    "pytorch-cuda-matrix-2.13": Source(
        url="https://github.com/pytorch/pytorch/pull/187075",
        shows="RELEASE.md's Release Compatibility Matrix for 2.13: stable CUDA 12.6 (NCCL 2.29.3) and CUDA 13.0 "
        "(NCCL 2.29.7), experimental 13.2; its CUDA Support Matrix, for 2.12 and 2.13: CUDA 12.6.3 Maxwell(5.0), "
        "Pascal(6.0), Volta(7.0), Turing(7.5), Ampere(8.0, 8.6), Hopper(9.0); 13.0.2 Turing(7.5), Ampere(8.0, 8.6), "
        "Hopper(9.0), Blackwell(10.0, 12.0) (the rows of https://github.com/pytorch/pytorch/pull/182849; Volta left "
        "the CUDA 12.8 build in 2.11, https://github.com/pytorch/pytorch/issues/172352). The CUDA 12.6 build is "
        "installed with pip install torch --index-url https://download.pytorch.org/whl/cu126",
    ),
    "nvidia-driver-deprecation": Source(
        url="https://forums.developer.nvidia.com/t/unix-graphics-feature-deprecation-schedule/60588",
        shows="NVIDIA's Unix graphics feature deprecation schedule: \"The release 580 series will be the last to "
        "support GPUs based on the Maxwell, Pascal, and Volta architectures\"",
    ),
    "cuda-13-volta": Source(
        url="https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html",
        shows="CUDA 13.0 removed offline compilation and library support for Maxwell, Pascal and Volta; toolkits "
        "through 12.x remain the way to build for them",
    ),
    "pulumi-aws-config": Source(
        url="https://www.pulumi.com/registry/packages/aws/installation-configuration/",
        shows="the AWS provider's stack settings: aws:profile, aws:region, aws:sharedConfigFiles, "
        "aws:sharedCredentialsFiles, aws:assumeRoles (roleArn, sessionName, externalId, duration, policy, ...)",
    ),
    "pulumi-aws-7-role-chaining": Source(
        url="https://www.pulumi.com/blog/announcing-7-0-of-the-pulumi-aws-provider",
        shows="pulumi-aws 7 chains IAM roles: aws:assumeRoles is a list, assumed in order (6.x read one "
        "aws:assumeRole)",
    ),
    "sts-assume-role": Source(
        url="https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html",
        shows="AssumeRole parameters: RoleSessionName 2-64 characters [\\w+=,.@-], DurationSeconds 900-43200, "
        "ExternalId, Policy, PolicyArns, SourceIdentity, Tags, TransitiveTagKeys",
    ),
    "pulumi-dynamic-providers": Source(
        url="https://www.pulumi.com/docs/iac/concepts/resources/dynamic-providers/",
        shows="a dynamic provider is serialized with the resource and run by the engine in a separate process",
    ),
    # --- prices and quotas --------------------------------------------------------------------------
    "eks-pricing": Source(
        url="https://aws.amazon.com/eks/pricing/",
        shows=f"$0.10 per cluster-hour in standard support, $0.60 in extended support (read {EKS_PRICES_AS_OF})",
    ),
    "vpc-pricing": Source(
        url="https://aws.amazon.com/vpc/pricing/",
        shows="NAT gateway $0.045/hour in us-east-1 (+$0.045/GB); public IPv4 address $0.005/hour",
    ),
    "ebs-pricing": Source(url="https://aws.amazon.com/ebs/pricing/", shows="gp3 $0.08/GB-month in us-east-1"),
    "kms-pricing": Source(url="https://aws.amazon.com/kms/pricing/", shows="$1/month per customer managed key"),
    "ec2-spot-pricing": Source(
        url="https://aws.amazon.com/ec2/spot/pricing/",
        shows="current Spot prices per instance type and Region, adjusted gradually by long-term supply and demand; "
        "Spot Instances are available at up to a 90% discount compared to On-Demand prices",
    ),
    "ec2-spot-example-prices": Source(
        url="https://docs.aws.amazon.com/autoscaling/ec2/userguide/weights-spot-price-per-unit-hour-example.html",
        shows="example us-east-1 Spot prices per zone next to On-Demand (example, not current pricing): c5.2xlarge "
        "$0.170-0.191 vs $0.34, c5.4xlarge $0.318-0.361 vs $0.68, c5.12xlarge $0.777-0.779 vs $2.04, c5.18xlarge "
        "$1.207-1.475 vs $3.06, c5.24xlarge $1.555 vs $4.08: 44% to 62% below On-Demand",
    ),
    "ec2-spot-advisor": Source(
        url="https://aws.amazon.com/ec2/spot/instance-advisor/",
        shows="per instance type and Region: the average savings of Spot over On-Demand and the frequency of "
        "interruption over the last 30 days",
    ),
    "ec2-capacity-blocks-pricing": Source(
        url="https://aws.amazon.com/ec2/capacityblocks/pricing/",
        shows="Capacity Blocks pricing is a reservation fee, charged up front when the block is reserved, and an "
        "operating-system fee while instances run (Linux billed per second)",
    ),
    "eks-quotas": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/service-quotas.html",
        shows="Nodes per managed node group: default 450, adjustable; Managed node groups per cluster: default 30, "
        "adjustable; codes L-BD136A63 and L-6D54EA21 under service code eks as the Service Quotas console shows them "
        "(https://console.aws.amazon.com/servicequotas/home/services/eks/quotas)",
    ),
    "ec2-vcpu-quotas": Source(
        url="https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html",
        shows="EC2 On-Demand and Spot instance quotas are counted in vCPUs per instance class; codes as the "
        "Service Quotas console shows them (https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas)",
    ),
    # --- what `pulumi up` waits for, and how long (components/catalog/timings.py) ---------------------------------
    "eks-cluster-creation-roadmap": Source(
        url="https://github.com/aws/containers-roadmap/issues/1227",
        shows="EKS: control plane provisioning time averaged 15 minutes when the issue to reduce it was opened",
    ),
    "eks-cluster-creation-measured": Source(
        url="https://easontechtalk.com/unofficial-eks-cluster-creation-performance-across-aws-regions",
        shows="an unofficial measurement of EKS cluster creation with one configuration in 21 Regions: 13 min 13 s "
        "(eu-west-2) to over 16 minutes; us-west-2 15 min 00 s, us-east-2 15 min 05 s",
    ),
    "eks-networking-add-ons": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/eks-networking-add-ons.html",
        shows="the built-in add-ons: the VPC CNI attaches network interfaces to the nodes and gives every Pod its "
        "address; kube-proxy maintains the network rules on the nodes; CoreDNS resolves the names of every Pod in "
        "the cluster",
    ),
    "tf-eks-addons-before-compute": Source(
        url="https://github.com/terraform-aws-modules/terraform-aws-eks/blob/bdb36aa5628228281a71856d5f7725235f06638f/"
        "docs/cluster/addons.md",
        shows="terraform-aws-eks creates the add-ons flagged before_compute before the node groups (without vpc-cni "
        "pods on new nodes fail their network setup), CoreDNS and kube-proxy in its example after them; the Pod "
        "Identity agent must precede the VPC CNI only when the CNI takes its permissions through Pod Identity "
        "instead of the node role, its default",
    ),
    "eksctl-addon-degraded-without-nodes": Source(
        url="https://github.com/eksctl-io/eksctl/issues/6954",
        shows="an add-on whose Deployment has no node to run on (aws-efs-csi-driver on a cluster without node "
        "groups) stays DEGRADED until nodes join, and a tool waiting for it to be ACTIVE fails",
    ),
    "eks-pod-identity-agent": Source(
        url="https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html",
        shows="the EKS Pod Identity agent runs as a DaemonSet on the nodes and gives the pods on its node the "
        "credentials of their association; a pod that calls AWS with a Pod Identity role needs it running",
    ),
    "kueue-troubleshooting-queues": Source(
        url="https://kueue.sigs.k8s.io/docs/tasks/troubleshooting/troubleshooting_queues/",
        shows="a ClusterQueue whose ResourceFlavor does not exist is inactive (FlavorNotFound) and a LocalQueue of "
        "an inactive ClusterQueue admits nothing (ClusterQueueIsInactive); both are created and become active once "
        "what they name exists",
    ),
    "pulumi-depends-on": Source(
        url="https://www.pulumi.com/docs/iac/concepts/resources/options/dependson/",
        shows="dependsOn and the inputs taken from other resources' outputs order creation, update and deletion; "
        "depending on a component depends on its children (Pulumi 3.10.1, pulumi/pulumi#7732)",
    ),
    "pulumi-replace-order": Source(
        url="https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/",
        shows="by default Pulumi creates a resource's replacement before it deletes the old one; the engine deletes "
        "the old one, like a resource the program no longer registers, only after every create and update of the "
        "update (pulumi/pulumi pkg/resource/deploy/step_generator.go: the delete step is generated after all "
        "creates/updates finish)",
    ),
    "pulumi-aws-node-group-replace": Source(
        url="https://github.com/pulumi/pulumi-aws/blob/015d343812852f40a045a28e7f6e04bca69548f3/provider/"
        "resource_overrides.go",
        shows="aws_eks_node_group's node_group_name is auto-named; pulumi-terraform-bridge (its "
        "nameRequiresDeleteBeforeReplace, pkg/tfbridge/schema.go) deletes before it replaces only a resource whose "
        "auto-named field the program set, and skips the "
        "auto-name where node_group_name_prefix, which conflicts with it, is set: a group named by prefix is created "
        "before the old one is deleted",
    ),
    "pulumi-python-sdk-prepare": Source(
        url="https://github.com/pulumi/pulumi/blob/1b5949891b3cefcb9974752b24a5ecef0acc86c8/sdk/python/lib/pulumi/"
        "runtime/resource.py",
        shows="prepare_resource: a registration waits for its explicit dependencies, its inputs, its parent's "
        "registration and, for a component, every provider in its options (_create_provider_ref awaits the "
        "provider's id) before it is sent",
    ),
    "pulumi-kubernetes-job-await": Source(
        url="https://www.pulumi.com/registry/packages/kubernetes/api-docs/batch/v1/job/",
        shows="a Job's create waits until its Complete condition is True (the built-in awaiter fails at once only on "
        "BackoffLimitExceeded and DeadlineExceeded); the "
        "pulumi.com/skipAwait annotation skips the wait (pulumi/pulumi-kubernetes#417)",
    ),
    "pulumi-kubernetes-deployment-await": Source(
        url="https://www.pulumi.com/registry/packages/kubernetes/api-docs/apps/v1/deployment/",
        shows="a Deployment's create waits until the new ReplicaSet's Pods are available",
    ),
    "stack config": Source(
        url="https://www.pulumi.com/docs/iac/concepts/config/",
        shows="facts a user supplied in the stack's instanceFacts config key (with their own source)",
    ),
}
