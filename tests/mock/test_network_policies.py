"""What the NetworkPolicies every stack registers allow, evaluated (tests/netpol.py) over the pods, Services and
policies the stack registers plus the cluster around them: CoreDNS and the ``kube-dns`` Service in
``kube-system``, the ``kubernetes`` Service, a pod of another namespace (also one that copies our labels), a
bare debug pod in the training namespace, the EKS Pod Identity Agent, the instance metadata service, the
control plane's ENIs and the internet."""

from functools import lru_cache
from typing import Any

import pytest

from components.catalog import (
    CLUSTER_DNS_NAMESPACE,
    CLUSTER_DNS_POD_LABELS,
    INSTANCE_METADATA_IPV4,
    POD_IDENTITY_AGENT_IPV4,
    POD_IDENTITY_AGENT_PORT,
)
from components.conventions import ETCD_APP, JOB_LABEL, RENDEZVOUS_LABEL
from components.workloads.etcd import ETCD_CLIENT_PORT
from components.workloads.tensorboard import TENSORBOARD_PORT
from tests.harness import Program, run_program, stack_names
from tests.netpol import AddressBook, Cluster, ContainerPort, Pod, Service, ServicePort, add_objects

STACKS = stack_names()
NAMESPACE = "training"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
#: Ports a job's processes pick at run time (NCCL, gloo, OpenMPI's daemons): any must work within a job.
DYNAMIC_PORTS = (29400, 29500, 40123, 58311)
S3 = "52.216.8.141"
CONTROL_PLANE_ENI = "10.0.3.57"
KUBERNETES_API_CLUSTER_IP = "172.20.0.1"
KUBE_DNS_CLUSTER_IP = "172.20.0.10"


def _docs(p: Program) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        for r in p.registrations
        if r.type.startswith("kubernetes:") and "kind" in r.inputs
    ]


@lru_cache(maxsize=None)
def world(stack: str) -> Cluster:
    """The stack's objects plus the cluster around them."""
    p = run_program(stack)
    cl = Cluster()
    addresses = AddressBook()
    add_objects(cl, _docs(p), addresses, min_pods=2)
    dns_pod = Pod(
        "coredns-0",
        CLUSTER_DNS_NAMESPACE,
        dict(CLUSTER_DNS_POD_LABELS),
        addresses.pod(),
        addresses.node(),
        (ContainerPort(53, "UDP", "dns"), ContainerPort(53, "TCP", "dns-tcp")),
    )
    cl.namespaces.setdefault(CLUSTER_DNS_NAMESPACE, {})
    cl.namespaces.setdefault("default", {})
    cl.pods += [
        dns_pod,
        Pod("intruder", "default", {"app": "intruder"}, addresses.pod(), addresses.node()),
        # copies every label our pods carry: still in the wrong namespace
        Pod(
            "impostor", "default", {RENDEZVOUS_LABEL: "etcd-v2", JOB_LABEL: "train"}, addresses.pod(), addresses.node()
        ),
        Pod("debug", NAMESPACE, {}, addresses.pod(), addresses.node()),
    ]
    cl.services += [
        Service(
            "kube-dns",
            CLUSTER_DNS_NAMESPACE,
            KUBE_DNS_CLUSTER_IP,
            dict(CLUSTER_DNS_POD_LABELS),
            (ServicePort(53, 53, "UDP"), ServicePort(53, 53, "TCP")),
        ),
        # endpoints are the control plane's ENIs: no selector
        Service("kubernetes", "default", KUBERNETES_API_CLUSTER_IP, {}, (ServicePort(443, 443),), (CONTROL_PLANE_ENI,)),
    ]
    return cl


def ours(cl: Cluster) -> list[Pod]:
    """The pods the stack runs in the training namespace."""
    return [p for p in cl.pods if p.namespace == NAMESPACE and p.name != "debug"]


def strangers(cl: Cluster) -> list[Pod]:
    return [p for p in cl.pods if p.name in ("intruder", "impostor", "debug")]


def pod(cl: Cluster, name: str) -> Pod:
    return next(p for p in cl.pods if p.name == name)


def service(cl: Cluster, name: str) -> Service:
    return next(s for s in cl.services if s.name == name)


def etcd_pods(cl: Cluster) -> list[Pod]:
    return [p for p in ours(cl) if p.labels.get("app.kubernetes.io/name") == ETCD_APP]


def jobs(cl: Cluster) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for p in ours(cl):
        if JOB_LABEL in p.labels:
            out.setdefault(p.labels[JOB_LABEL], []).append(p)
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_every_pod_of_the_namespace_is_isolated_in_both_directions(stack: str) -> None:
    cl = world(stack)
    assert ours(cl), "the stack runs pods"
    for p in [*ours(cl), pod(cl, "debug")]:
        for direction in ("Ingress", "Egress"):
            assert cl._selecting(p, direction), f"{p.name} is not isolated for {direction}"
    assert not any(p["metadata"]["namespace"] != NAMESPACE for p in cl.policies)


@pytest.mark.parametrize("stack", STACKS)
def test_etcd_admits_only_its_rendezvous_clients(stack: str) -> None:
    cl = world(stack)
    clients = [p for p in ours(cl) if p.labels.get(RENDEZVOUS_LABEL) == "etcd-v2"]
    servers = etcd_pods(cl)
    assert bool(servers) == bool(clients), "etcd runs exactly when a PyTorch job rendezvouses through it"
    if not servers:
        assert not [p for p in cl.policies if "etcd" in p["metadata"]["name"]]
        return
    (etcd,) = servers
    svc = next(s for s in cl.services if s.selector.get("app.kubernetes.io/name") == ETCD_APP)
    for c in clients:
        assert c.labels["app.kubernetes.io/name"] == "pytorch-job"
        assert cl.pod_to_service(c, svc, ETCD_CLIENT_PORT), f"{c.name} reaches etcd through its Service"
        assert cl.pod_to_pod(c, etcd, ETCD_CLIENT_PORT)
        assert not cl.pod_to_pod(c, etcd, 2380), "only the client port"
    others = [p for p in cl.pods if p not in clients and p is not etcd]
    assert any(p.labels.get("app.kubernetes.io/name") == "dataset-staging" for p in others) == stack_has_staging(stack)
    for p in others:
        assert not cl.pod_to_pod(p, etcd, ETCD_CLIENT_PORT), f"{p.name} must not reach etcd"
        assert not cl.pod_to_service(p, svc, ETCD_CLIENT_PORT), f"{p.name} must not reach etcd's Service"
    assert cl.ip_to_pod(etcd.node_ip, etcd, ETCD_CLIENT_PORT), "the kubelet's probes reach it"


def stack_has_staging(stack: str) -> bool:
    return bool(run_program(stack).of_type("eks-training:index:DatasetStaging"))


@pytest.mark.parametrize("stack", STACKS)
def test_pods_of_a_job_reach_each_other_on_any_port(stack: str) -> None:
    cl = world(stack)
    found = jobs(cl)
    assert found
    for job, members in found.items():
        if any(p.labels.get("app.kubernetes.io/name") in ("dataset-staging", "benchmark-collector") for p in members):
            continue  # a single pod: nothing to reach
        assert len(members) >= 2, job
        for a in members:
            for b in members:
                if a is b:
                    continue
                for port in DYNAMIC_PORTS:
                    assert cl.pod_to_pod(a, b, port), f"{a.name} -> {b.name}:{port}"
                assert cl.pod_to_pod(a, b, 50000, "UDP")
        for p in members:
            for c in p.ports:
                for other in members:
                    if other is not p:
                        assert cl.pod_to_pod(other, p, c.port, c.protocol), f"{other.name} -> {p.name}:{c.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_pods_of_different_jobs_cannot_connect(stack: str) -> None:
    """Jobs exchange files on the shared volume, never connections: a job cannot disturb another's processes."""
    cl = world(stack)
    found = jobs(cl)
    pairs = 0
    for ja, pa in found.items():
        for jb, pb in found.items():
            if ja == jb:
                continue
            for a in pa:
                for b in pb:
                    for port in (*DYNAMIC_PORTS, 2222, *(c.port for c in b.ports)):
                        assert not cl.pod_to_pod(a, b, port), f"{a.name} ({ja}) -> {b.name} ({jb}):{port}"
                    pairs += 1
    assert pairs or len(found) == 1
    # pods outside any job (etcd, TensorBoard) and strangers reach no job's pod either
    for p in [*[q for q in ours(cl) if JOB_LABEL not in q.labels], *strangers(cl)]:
        for members in found.values():
            for b in members:
                assert not cl.pod_to_pod(p, b, DYNAMIC_PORTS[0]), f"{p.name} -> {b.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_dns_works_from_every_pod(stack: str) -> None:
    cl = world(stack)
    kube_dns, coredns = service(cl, "kube-dns"), pod(cl, "coredns-0")
    for p in [*ours(cl), pod(cl, "debug")]:
        for protocol in ("UDP", "TCP"):
            assert cl.pod_to_service(p, kube_dns, 53, protocol), f"{p.name}: DNS over {protocol}"
            assert cl.pod_to_pod(p, coredns, 53, protocol)
        assert not cl.pod_to_pod(p, coredns, 9153), "DNS only, not CoreDNS's metrics"


@pytest.mark.parametrize("stack", STACKS)
def test_job_pods_reach_https_the_api_server_and_pod_identity_but_not_instance_metadata(stack: str) -> None:
    cl = world(stack)
    job_pods = [p for members in jobs(cl).values() for p in members]
    kinds = {p.labels.get("app.kubernetes.io/name") for p in job_pods}
    assert kinds & {"pytorch-job", "mpi-job", "tensorflow-job", "command-job"}, kinds
    if stack_has_staging(stack):
        assert "dataset-staging" in kinds
    api = service(cl, "kubernetes")
    for p in job_pods:
        assert cl.pod_to_ip(p, S3, 443), f"{p.name}: HTTPS outside the cluster (S3, ECR, datasets)"
        assert cl.pod_to_service(p, api, 443) and cl.pod_to_ip(p, CONTROL_PLANE_ENI, 443), f"{p.name}: the API server"
        assert cl.pod_to_ip(p, POD_IDENTITY_AGENT_IPV4, POD_IDENTITY_AGENT_PORT), f"{p.name}: Pod Identity credentials"
        assert not cl.pod_to_ip(p, INSTANCE_METADATA_IPV4, 80), f"{p.name} must not read the node's metadata"
        assert not cl.pod_to_ip(p, S3, 80), "plain HTTP outside is not needed (datasets are https:// or s3://)"
    for p in [q for q in ours(cl) if JOB_LABEL not in q.labels] + [pod(cl, "debug")]:
        assert not cl.pod_to_ip(p, S3, 443), f"{p.name} (no job) has no business outside"
        assert not cl.pod_to_ip(p, POD_IDENTITY_AGENT_IPV4, POD_IDENTITY_AGENT_PORT)


def test_mpi_launcher_reaches_its_workers_over_ssh_and_they_reach_it_back() -> None:
    cl = world("mpi-horovod")
    mpi = {
        job: members
        for job, members in jobs(cl).items()
        if members[0].labels.get("app.kubernetes.io/name") == "mpi-job"
    }
    assert set(mpi) == {"nccl", "horovod"}
    for job, members in mpi.items():
        (launcher,) = [p for p in members if "-launcher-" in p.name]
        workers = [p for p in members if "-worker-" in p.name]
        assert len(workers) == 2
        for w in workers:
            assert cl.pod_to_pod(launcher, w, 2222), "mpirun starts the ranks over ssh (port 2222 in our images)"
            assert cl.pod_to_pod(w, launcher, 40123), "OpenMPI's daemons connect back to mpirun"
        other = next(m for j, m in mpi.items() if j != job)
        assert not any(cl.pod_to_pod(launcher, w, 2222) for w in other if "-worker-" in w.name)


@pytest.mark.parametrize("stack", STACKS)
def test_tensorboard_is_reached_by_no_pod(stack: str) -> None:
    """``kubectl port-forward`` dials TensorBoard inside its own network namespace; no pod needs to."""
    cl = world(stack)
    boards = [p for p in ours(cl) if p.labels.get("app.kubernetes.io/name") == "tensorboard"]
    if not boards:
        return
    (board,) = boards
    svc = next(s for s in cl.services if s.selector.get("app.kubernetes.io/name") == "tensorboard")
    for p in cl.pods:
        if p is not board:
            assert not cl.pod_to_pod(p, board, TENSORBOARD_PORT), p.name
            assert not cl.pod_to_service(p, svc, TENSORBOARD_PORT), p.name
    assert cl.ip_to_pod(board.node_ip, board, TENSORBOARD_PORT), "readiness probe and port-forward's fallback"
    assert not cl.ip_to_pod(CONTROL_PLANE_ENI, board, TENSORBOARD_PORT)


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_outside_the_namespace_reaches_its_pods(stack: str) -> None:
    cl = world(stack)
    for p in ours(cl):
        for port in (*{c.port for c in p.ports}, *DYNAMIC_PORTS, 22, 2222):
            for s in strangers(cl):
                assert not cl.pod_to_pod(s, p, port), f"{s.name} -> {p.name}:{port}"
            assert not cl.ip_to_pod("203.0.113.9", p, port)


@pytest.mark.parametrize("stack", STACKS)
def test_services_listen_on_their_pods_ports(stack: str) -> None:
    """The VPC CNI's policies need a Service's port equal to its target port (source key
    ``vpc-cni-network-policy-considerations``)."""
    for s in world(stack).services:
        if s.namespace == NAMESPACE:
            assert all(sp.port == sp.target_port for sp in s.ports), s


@pytest.mark.parametrize("stack", STACKS)
def test_policies_exist_before_anything_in_the_namespace(stack: str) -> None:
    """Every object in the training namespace is created after every policy (no pod starts unprotected)."""
    p = run_program(stack)
    policies = {r.urn for r in p.of_type(POLICY)}
    assert policies
    late = [
        r
        for r in p.registrations
        if r.type.startswith("kubernetes:")
        and r.type != POLICY
        and (r.inputs.get("metadata") or {}).get("namespace") == NAMESPACE
        # the storage's own objects, created with the namespace: the claim (and with FSx its static volume and the
        # one-shot Job that hands the directories to the training user, a busybox chown without network use)
        and not r.name.startswith((f"eks-training-{stack}-efs-", f"eks-training-{stack}-fsx-"))
    ]
    assert late
    for r in late:
        missing = policies - set(r.deps_of("metadata"))
        assert not missing, f"{r.name} is not created after {sorted(missing)}"
