"""``TrainingCluster``: the EKS control plane, its node role, core add-ons and the system node group.

It is pulumi-eks's ``eks.Cluster`` with no default node group. The core add-ons are EKS managed add-ons, created in
the order a real cluster needs: :data:`NODE_ADDONS` before the node groups, :data:`LATE_ADDONS` after the system
group. The node monitoring agent's DCGM host engine tolerates every taint, as the agent does
(https://docs.aws.amazon.com/eks/latest/userguide/node-health.html). The authentication mode is ``API``, with access
entries for ``admin_role_arns`` (:func:`access_entries`). The control plane's log group is made first, with a
retention (:func:`control_plane_log_group_name`).

Why: docs/explanation/pulumi-up.md, "The cluster and its add-ons"; docs/explanation/operations.md."""

import json
import re
from typing import Mapping, Optional, Sequence, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
from typing_extensions import NotRequired

from components.addons import addon_version
from components.args import checks_args
from components.catalog import ANYWHERE_IPV4, HTTPS_PORT, VPC_CNI_NETWORK_POLICY_CONFIG
from components.catalog.addons import configuration_settings
from components.catalog.operations import NODE_MONITORING_ADDON, NODE_MONITORING_CONFIGURATION
from components.conventions import DEFAULT_CLUSTER_LOG_RETENTION_DAYS
from components.iam import account_admin_key_policy, eks_access_policy_arn, managed_policy_arn, service_trust_policy
from components.naming import fit_name, name_limit
from components.nodegroup import TrainingNodeGroup, TrainingNodeGroupArgs, check_sizes
from components.nodeplan import SYSTEM_DISK_SIZE_GIB
from components.ordering import ordered_after
from components.partition import current_partition
from components.scheduling import SYSTEM_ROLE

#: AWS managed policies of the node role. The VPC CNI runs with the node's credentials (as EKS sets
#: it up by default); every other AWS-calling driver gets its own Pod Identity role.
NODE_ROLE_POLICIES: Mapping[str, str] = {
    "worker": "AmazonEKSWorkerNodePolicy",
    "cni": "AmazonEKS_CNI_Policy",
    "ecr": "AmazonEC2ContainerRegistryPullOnly",
    "ssm": "AmazonSSMManagedInstanceCore",
}
#: EKS access policy given to ``admin_role_arns``.
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
#: EKS access policy given to ``namespace_members``, scoped to their namespace.
NAMESPACE_ADMIN_POLICY = "AmazonEKSAdminPolicy"
#: Add-ons a node needs to become Ready (the pod network and the Service routes the CNI reaches the API server
#: through): node groups wait for them.
NODE_ADDONS = ("vpc-cni", "kube-proxy")
#: The Pod Identity agent: a DaemonSet that serves credentials to pods on their node; created beside the node groups.
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"
#: Add-ons whose Deployments need nodes to run on: they wait for the system node group.
LATE_ADDONS = ("coredns", "metrics-server", NODE_MONITORING_ADDON)
#: The cluster DNS add-on: what pods that resolve names wait for.
DNS_ADDON = "coredns"

#: Add-on settings (``configurationValues``): the VPC CNI enforces Kubernetes NetworkPolicies; the node monitoring
#: agent's DCGM host engine (``dcgm-server``) tolerates what the agent tolerates, so it runs on the tainted GPU nodes.
ADDON_CONFIGURATION: Mapping[str, Mapping[str, object]] = {
    "vpc-cni": VPC_CNI_NETWORK_POLICY_CONFIG,
    NODE_MONITORING_ADDON: NODE_MONITORING_CONFIGURATION,
}


def control_plane_log_group_name(cluster_name: str) -> str:
    """The log group EKS writes control-plane logs to (https://docs.aws.amazon.com/eks/latest/userguide/control-plane-logs.html)."""
    return f"/aws/eks/{cluster_name}/cluster"


class SystemNodeGroupSpec(TypedDict):
    """Size of the system node group."""

    instance_type: str
    """CPU instance type of the system nodes."""
    min_size: int
    """Minimum node count."""
    desired_size: int
    """Desired node count."""
    max_size: int
    """Maximum node count."""
    disk_size_gib: NotRequired[int]
    """Root volume size (gp3, encrypted). Default 50."""
    autoscaled: NotRequired[bool]
    """cluster-autoscaler owns the desired size (EKS tags every managed group for auto-discovery)."""
    host_setup: NotRequired[Sequence[str]]
    """Names of the host-side facts the system nodes must have (``TrainingNodeGroupArgs.host_setup``). Default none."""
    release_version: NotRequired[str]
    """The EKS AMI release version of the system nodes (``TrainingNodeGroupArgs.release_version``)."""
    keep_release_version: NotRequired[bool]
    """Keep the release the group runs once created (``TrainingNodeGroupArgs.keep_release_version``)."""


class NamespaceMemberArgs(TypedDict):
    """An IAM role with access to one namespace only (see ``TrainingClusterArgs.namespace_members``)."""

    principal_arn: str
    """The IAM role."""
    namespace: str
    """The namespace the access policy is scoped to."""
    kubernetes_group: str
    """The Kubernetes group the access entry puts the role in."""


class TrainingClusterArgs(TypedDict):
    """Inputs of :class:`TrainingCluster`."""

    cluster_name: str
    """EKS cluster name (plain string: it appears in subnet tags and IAM role names)."""
    kubernetes_version: str
    """Kubernetes minor version, e.g. ``1.33``."""
    vpc_id: pulumi.Input[str]
    """VPC id."""
    private_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]]
    """Private subnets of the control-plane ENIs and the system nodes (in zones EKS accepts for control planes)."""
    public_subnet_ids: NotRequired[pulumi.Input[Sequence[pulumi.Input[str]]]]
    """Public subnets (internet-facing load balancers only)."""
    system_node_group: SystemNodeGroupSpec
    """The on-demand CPU node group for add-ons and controllers."""
    support_type: NotRequired[str]
    """``upgradePolicy.supportType``: ``STANDARD`` (default; EKS upgrades the cluster when standard support
    ends) or ``EXTENDED`` (keeps the version, billed at the extended-support price)."""
    endpoint_public_access: NotRequired[bool]
    """Expose the API endpoint publicly (restricted by ``public_access_cidrs``). Default True. A private-only
    endpoint is reachable from inside the VPC only (run ``pulumi up`` there or over a VPN)."""
    public_access_cidrs: NotRequired[Sequence[str]]
    """CIDRs allowed to reach the public endpoint (ignored without one). Default ``["0.0.0.0/0"]``."""
    private_access_cidrs: NotRequired[Sequence[str]]
    """IPv4 CIDRs allowed to reach the private endpoint on port 443 (a bastion's subnet, a VPN's range): an ingress
    rule each in the cluster security group, which otherwise admits only the cluster's nodes. The nodes carry that
    group too, so these networks also reach port 443 on them. Default none; each CIDR once."""
    log_retention_days: NotRequired[int]
    """Retention of the control-plane log group, in days (a CloudWatch retention value). Default 30."""
    admin_role_arns: NotRequired[Sequence[str]]
    """IAM roles that get cluster-admin access entries."""
    namespace_members: NotRequired[Sequence["NamespaceMemberArgs"]]
    """IAM roles that get access entries scoped to one namespace (a team's members): the AmazonEKSAdminPolicy there
    and a Kubernetes group of their own (bound by the caller to what else they need in that namespace)."""
    log_types: NotRequired[Sequence[str]]
    """Control-plane log types sent to CloudWatch. Default api, audit, authenticator."""
    service_cidr: NotRequired[str]
    """Kubernetes service IP range (outside the VPC)."""
    create_oidc_provider: NotRequired[bool]
    """Create the IAM OIDC provider for IRSA. Default False (drivers use Pod Identity)."""
    addon_versions: NotRequired[Mapping[str, str]]
    """Add-on versions that override this project's pins (``components.catalog.addons.ADDON_VERSIONS``); an add-on
    with neither gets EKS's default for the Kubernetes version."""
    keep_secrets_key: NotRequired[bool]
    """Keep the secrets KMS key on ``pulumi destroy`` (``retain_on_delete``): set it when storage encrypted with
    this key (``secrets_kms_key_arn``) is kept on destroy, which would be unreadable once the key is deleted
    (https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html). Default False."""
    token_env: NotRequired[Mapping[str, str]]
    """Environment the kubeconfig's ``aws eks get-token`` runs with, beside the caller's (e.g. ``AWS_CONFIG_FILE``).
    ``AWS_PROFILE``, the deploying AWS provider's profile, is given as ``--profile`` instead, which credentials in
    the caller's environment cannot override (pulumi-eks's ``kubeconfig_json`` carries no profile)."""
    token_role_arn: NotRequired[str]
    """A role ``aws eks get-token`` assumes before it signs (``--role-arn``): the one role the deploying AWS provider
    assumes, which EKS made the cluster's admin. Default: none."""
    tags: NotRequired[dict[str, str]]
    """AWS tags for every resource."""


def _managed(partition: pulumi.Output[str], policy: str) -> pulumi.Output[str]:
    return partition.apply(lambda p: managed_policy_arn(p, policy))


def access_entries(args: TrainingClusterArgs, partition: pulumi.Output[str]) -> dict[str, eks.AccessEntryArgsDict]:
    """EKS access entries: cluster administrators (``admin_role_arns``), and each namespace member with
    AmazonEKSAdminPolicy scoped to its namespace: Kubernetes' admin ClusterRole there (workloads, services, network
    policies, roles and bindings), nothing cluster-wide
    (https://docs.aws.amazon.com/eks/latest/userguide/access-policy-permissions.html)."""
    entries: dict[str, eks.AccessEntryArgsDict] = {
        f"admin-{i}": {
            "principal_arn": arn,
            "access_policies": {
                "cluster-admin": {
                    "policy_arn": partition.apply(lambda p: eks_access_policy_arn(p, CLUSTER_ADMIN_POLICY)),
                    "access_scope": {"type": "cluster"},
                }
            },
        }
        for i, arn in enumerate(args.get("admin_role_arns") or [])
    }
    for i, member in enumerate(args.get("namespace_members") or []):
        entries[f"member-{i}"] = {
            "principal_arn": member["principal_arn"],
            "kubernetes_groups": [member["kubernetes_group"]],
            "access_policies": {
                "namespace-admin": {
                    "policy_arn": partition.apply(lambda p: eks_access_policy_arn(p, NAMESPACE_ADMIN_POLICY)),
                    "access_scope": {"type": "namespace", "namespaces": [member["namespace"]]},
                }
            },
        }
    return entries


def with_token_credentials(kubeconfig_json: str, env: Mapping[str, str], role_arn: Optional[str]) -> str:
    """``kubeconfig_json`` whose ``aws eks get-token`` runs with ``env`` added and, given ``role_arn``, assumes that
    role first (the kubeconfig as it was when neither is given)."""
    if not env and not role_arn:
        return kubeconfig_json
    config = json.loads(kubeconfig_json)
    # a profile as --profile: AWS_PROFILE would yield to credentials in the caller's environment (pulumi-eks does so)
    rest = {k: v for k, v in env.items() if k != "AWS_PROFILE"}
    extra = (["--profile", env["AWS_PROFILE"]] if "AWS_PROFILE" in env else []) + (
        ["--role-arn", role_arn] if role_arn else []
    )
    for user in config.get("users") or []:
        run = (user.get("user") or {}).get("exec")
        if run is None:
            continue
        if rest:
            run["env"] = [*(run.get("env") or []), *({"name": k, "value": v} for k, v in sorted(rest.items()))]
        run["args"] = [*(run.get("args") or []), *extra]
    return json.dumps(config)


class TrainingCluster(pulumi.ComponentResource):
    """KMS key for secrets, node IAM role, EKS cluster, managed core add-ons and the system node group."""

    cluster: eks.Cluster
    """The pulumi-eks cluster, for resources of your own (the components here take its name and outputs instead)."""
    cluster_name: pulumi.Output[str]
    """The EKS cluster name; resolves once the cluster and the add-ons that nodes need to become Ready (vpc-cni,
    kube-proxy) exist, so node groups created from it join a working cluster."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (JSON) using ``aws eks get-token`` with ``token_env`` and ``token_role_arn``: this program's
    Kubernetes providers. A secret; a provider built from it is created after the system nodes and the Pod Identity
    agent (``ordered_after``), and on destroy its objects go first."""
    shared_kubeconfig: pulumi.Output[str]
    """The same kubeconfig without ``token_env`` and ``token_role_arn``, for others (kubectl, another stack), who add
    their own credentials; a secret."""
    coredns_addon: aws.eks.Addon
    """The CoreDNS add-on: what pods that resolve names (jobs, etcd's clients, controllers calling AWS) wait for
    (``depends_on``); it waits for the system nodes."""
    pod_identity_agent_addon: aws.eks.Addon
    """The EKS Pod Identity agent add-on: what an add-on or chart whose pods take a Pod Identity role waits for."""
    node_role_arn: pulumi.Output[str]
    """The node IAM role's ARN (resolves after its policies are attached)."""
    node_security_group_id: pulumi.Output[str]
    """The EKS cluster security group every managed node carries."""
    secrets_kms_key_arn: pulumi.Output[str]
    """KMS key used for envelope encryption of Kubernetes secrets."""
    oidc_provider_arn: pulumi.Output[str]
    """IAM OIDC provider ARN (only meaningful with ``create_oidc_provider``)."""
    system_node_group_name: pulumi.Output[str]
    """Name of the system node group."""
    system_release_version: pulumi.Output[str]
    """The EKS AMI release version the system nodes run, as EKS reports it (the system group's
    ``release_version``)."""
    system_node_labels: pulumi.Output[dict[str, str]]
    """Labels of the system nodes, as an output (to export). To place a pod there, use the plain
    :func:`components.scheduling.system_node_selector`."""
    addon_names: list[str]
    """Names of the EKS add-ons this component manages."""
    installed_addons: pulumi.Output[dict[str, str]]
    """Each of those add-ons' version as EKS installed it, by name; resolves once every one is installed (or updated)
    at its version."""
    log_group_name: pulumi.Output[str]
    """The control-plane log group (created here with a retention; removed with the stack)."""

    @checks_args
    def __init__(self, name: str, args: TrainingClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        spec = args["system_node_group"]
        check_sizes(f"{name}.system_node_group", spec["min_size"], spec["desired_size"], spec["max_size"])
        super().__init__("eks-training:index:TrainingCluster", name, None, opts)
        partition = current_partition(self)
        kms_key = self._secrets_key(name, args, partition)
        node_role_arn = self._node_role(name, args, partition)
        log_group = self._log_group(name, args)
        self.cluster = self._eks_cluster(name, args, partition, kms_key, log_group)
        self._api_access(name, args)
        # An output of the remote component resolves only after all of its children exist.
        cluster_name = args["cluster_name"]
        eks_name = self.cluster.cluster_security_group_id.apply(lambda _: cluster_name)
        node_addons = [self._addon(name, args, eks_name, n, []) for n in NODE_ADDONS]
        pod_identity_agent = self._addon(name, args, eks_name, POD_IDENTITY_AGENT_ADDON, [])
        # The public cluster name resolves once nodes can become Ready (the CNI and kube-proxy are in place): node
        # groups built from it, here or in other components, wait for them and nothing else.
        self.cluster_name = ordered_after(eks_name, *[a.arn for a in node_addons])
        system = self._system_group(name, args, node_role_arn)
        late = [self._addon(name, args, eks_name, n, [system]) for n in LATE_ADDONS]

        self.shared_kubeconfig, self.kubeconfig = self._kubeconfigs(args, system, pod_identity_agent)
        self.node_role_arn = node_role_arn
        self.node_security_group_id = self.cluster.node_security_group_id
        self.secrets_kms_key_arn = kms_key.arn
        self.oidc_provider_arn = self.cluster.oidc_provider_arn
        self.system_node_group_name = system.node_group_name
        self.system_release_version = system.release_version
        self.system_node_labels = system.labels
        self.addon_names = [*NODE_ADDONS, POD_IDENTITY_AGENT_ADDON, *LATE_ADDONS]
        addons = [*node_addons, pod_identity_agent, *late]
        self.installed_addons = pulumi.Output.all(*[a.addon_version for a in addons]).apply(
            lambda v: dict(zip(self.addon_names, (str(x) for x in v)))
        )
        self.coredns_addon = late[LATE_ADDONS.index(DNS_ADDON)]
        self.pod_identity_agent_addon = pod_identity_agent
        self.log_group_name = log_group.name
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "kubeconfig": self.kubeconfig,
                "shared_kubeconfig": self.shared_kubeconfig,
                "node_role_arn": self.node_role_arn,
                "oidc_provider_arn": self.oidc_provider_arn,
                "node_security_group_id": self.node_security_group_id,
                "secrets_kms_key_arn": self.secrets_kms_key_arn,
                "system_node_group_name": self.system_node_group_name,
                "system_release_version": self.system_release_version,
                "system_node_labels": self.system_node_labels,
                "log_group_name": self.log_group_name,
                "installed_addons": self.installed_addons,
                "addon_names": self.addon_names,
                "cluster": self.cluster,
                "coredns_addon": self.coredns_addon,
                "pod_identity_agent_addon": self.pod_identity_agent_addon,
            }
        )

    def _log_group(self, name: str, args: TrainingClusterArgs) -> aws.cloudwatch.LogGroup:
        """The control plane's log group, made before the cluster so that its retention applies from the start."""
        return aws.cloudwatch.LogGroup(
            f"{name}-control-plane-logs",
            name=control_plane_log_group_name(args["cluster_name"]),
            retention_in_days=int(args.get("log_retention_days", DEFAULT_CLUSTER_LOG_RETENTION_DAYS)),
            tags=dict(args.get("tags") or {}),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _kubeconfigs(
        self, args: TrainingClusterArgs, system: TrainingNodeGroup, pod_identity_agent: aws.eks.Addon
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """The kubeconfig to share (no credentials) and the one this program's provider uses (signed as the stack's
        AWS provider: ``token_env``, ``token_role_arn``). Kubernetes objects are created through a provider built from
        it: it is ordered after the system nodes (where the controllers of Helm releases run: an atomic release would
        otherwise time out) and the Pod Identity agent (credentials for pods that call AWS), and on destroy those
        objects go first. It stays known in a preview that replaces the system group (``ordered_after``).
        CoreDNS, metrics-server and the node monitoring agent are not waited for here: pods that resolve names wait
        for CoreDNS themselves (``coredns_addon``), nothing waits for the other two."""
        env, role = dict(args.get("token_env") or {}), args.get("token_role_arn")
        shared: pulumi.Output[str] = pulumi.Output.secret(
            ordered_after(self.cluster.kubeconfig_json, system.node_group_name, pod_identity_agent.arn).apply(str)
        )
        return shared, shared.apply(lambda k: with_token_credentials(k, env, role))

    def _secrets_key(self, name: str, args: TrainingClusterArgs, partition: pulumi.Output[str]) -> aws.kms.Key:
        """The KMS key (rotated, administered by the account) that encrypts the cluster's secrets, and its alias."""
        cluster_name = args["cluster_name"]
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))
        key_policy = pulumi.Output.all(partition, caller.account_id).apply(
            lambda v: account_admin_key_policy(str(v[0]), str(v[1]))
        )
        kms_key = aws.kms.Key(
            f"{name}-secrets-key",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=7,
            policy=key_policy,
            tags=dict(args.get("tags") or {}),
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=bool(args.get("keep_secrets_key", False))),
        )
        aws.kms.Alias(
            f"{name}-secrets-key-alias",
            name=f"alias/{cluster_name}-eks-secrets",
            target_key_id=kms_key.key_id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return kms_key

    def _node_role(self, name: str, args: TrainingClusterArgs, partition: pulumi.Output[str]) -> pulumi.Output[str]:
        """The nodes' IAM role with its managed policies; its ARN resolves only after every policy is attached."""
        cluster_name = args["cluster_name"]
        child = pulumi.ResourceOptions(parent=self)
        node_role = aws.iam.Role(
            f"{name}-node-role",
            name=fit_name(f"{cluster_name}-node", name_limit("aws:iam/role:Role", "name")),
            description=f"EKS managed nodes of {cluster_name}",
            assume_role_policy=service_trust_policy("ec2.amazonaws.com"),
            tags=dict(args.get("tags") or {}),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{role}",
                role=node_role.name,
                policy_arn=_managed(partition, policy),
                opts=child,
            )
            for role, policy in NODE_ROLE_POLICIES.items()
        ]
        # Node groups wait for the attachments (and are deleted before them, which EKS needs to clean up instances
        # and ENIs).
        return pulumi.Output.all(node_role.arn, *[a.id for a in attachments]).apply(lambda v: str(v[0]))

    def _eks_cluster(
        self,
        name: str,
        args: TrainingClusterArgs,
        partition: pulumi.Output[str],
        kms_key: aws.kms.Key,
        log_group: aws.cloudwatch.LogGroup,
    ) -> eks.Cluster:
        """The EKS cluster: private nodes, access entries only, secrets encrypted, its control-plane logs kept in
        ``log_group``, no default node group or add-ons (this component makes them)."""
        public = bool(args.get("endpoint_public_access", True))
        return eks.Cluster(
            f"{name}-eks",
            name=args["cluster_name"],
            version=args["kubernetes_version"],
            vpc_id=args["vpc_id"],
            private_subnet_ids=args["private_subnet_ids"],
            public_subnet_ids=args.get("public_subnet_ids"),
            node_associate_public_ip_address=False,
            endpoint_private_access=True,
            endpoint_public_access=public,
            # pulumi-eks refuses publicAccessCidrs with a private-only endpoint
            public_access_cidrs=list(args.get("public_access_cidrs") or [ANYWHERE_IPV4]) if public else None,
            upgrade_policy={"support_type": args.get("support_type", "STANDARD")},
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=access_entries(args, partition),
            enabled_cluster_log_types=list(args.get("log_types") or ["api", "audit", "authenticator"]),
            encryption_config_key_arn=kms_key.arn,
            skip_default_node_group=True,
            skip_default_security_groups=True,
            bootstrap_self_managed_addons=False,
            use_default_vpc_cni=True,
            kube_proxy_addon_options={"enabled": False},
            coredns_addon_options={"enabled": False},
            create_oidc_provider=bool(args.get("create_oidc_provider", False)),
            kubernetes_service_ip_address_range=args.get("service_cidr"),
            tags=dict(args.get("tags") or {}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[log_group]),
        )

    def _api_access(self, name: str, args: TrainingClusterArgs) -> None:
        """Port 443 of the API server from each of ``private_access_cidrs``, in the security group EKS made for the
        cluster (its ENIs and the nodes carry it). The private endpoint needs it for anything outside that group, such
        as `kubectl` on a bastion (https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html)."""
        for cidr in args.get("private_access_cidrs") or ():
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-api-from-{re.sub(r'[./]', '-', cidr)}",
                security_group_id=self.cluster.cluster_security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=HTTPS_PORT,
                to_port=HTTPS_PORT,
                description=f"Kubernetes API from {cidr}",
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _addon(
        self,
        name: str,
        args: TrainingClusterArgs,
        eks_name: pulumi.Output[str],
        addon_name: str,
        depends: Sequence[pulumi.Resource],
    ) -> aws.eks.Addon:
        """One managed add-on at the version pinned for it (``addon_versions``) or EKS's default for the minor."""
        config = ADDON_CONFIGURATION.get(addon_name)
        settings = configuration_settings(addon_name, config) if config else set()
        pin = dict(args.get("addon_versions") or {}).get(addon_name)
        version_out = addon_version(self, addon_name, args["kubernetes_version"], pin, settings)
        return aws.eks.Addon(
            f"{name}-addon-{addon_name}",
            cluster_name=eks_name,
            addon_name=addon_name,
            addon_version=version_out,
            configuration_values=json.dumps(dict(config), sort_keys=True) if config else None,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            tags=dict(args.get("tags") or {}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends)),
        )

    def _system_group(
        self, name: str, args: TrainingClusterArgs, node_role_arn: pulumi.Output[str]
    ) -> TrainingNodeGroup:
        """The system node group, at the control plane's minor (it waits for the add-ons nodes need through
        ``cluster_name``)."""
        spec = args["system_node_group"]
        system_args: TrainingNodeGroupArgs = {
            "cluster_name": self.cluster_name,
            "node_role_arn": node_role_arn,
            "subnet_ids": args["private_subnet_ids"],
            "instance_types": [spec["instance_type"]],
            "role": SYSTEM_ROLE,
            "gpus_per_node": 0,
            "min_size": spec["min_size"],
            "desired_size": spec["desired_size"],
            "max_size": spec["max_size"],
            "capacity_type": "ON_DEMAND",
            "disk_size_gib": spec.get("disk_size_gib", SYSTEM_DISK_SIZE_GIB),
            "ignore_desired_size_changes": bool(spec.get("autoscaled", False)),
            "host_setup": list(spec.get("host_setup") or ()),
            "kubernetes_version": args["kubernetes_version"],
            "keep_release_version": bool(spec.get("keep_release_version", False)),
            "tags": dict(args.get("tags") or {}),
        }
        if "release_version" in spec:
            system_args["release_version"] = spec["release_version"]
        return TrainingNodeGroup(f"{name}-system", system_args, opts=pulumi.ResourceOptions(parent=self))
