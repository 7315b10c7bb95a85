"""A small evaluator of Kubernetes NetworkPolicies, for tests that check what the policies a stack registers
allow, not merely that they exist.

Semantics (https://kubernetes.io/docs/concepts/services-networking/network-policies/):

- a pod is isolated for ingress (egress) when a policy of its namespace selects it (``podSelector``) and has
  ``Ingress`` (``Egress``) in its ``policyTypes``; ``policyTypes`` defaults to ``Ingress``, plus ``Egress``
  when the policy has egress rules;
- a connection passes when the source may send it (not isolated for egress, or some egress rule of a policy
  selecting it matches the destination and port) and the destination may receive it (likewise, ingress);
  policies only add: there is no deny rule;
- a rule without ``from``/``to`` matches every peer, without ``ports`` every port; a peer is an ``ipBlock``
  (the address in ``cidr`` and in none of ``except``), or pods chosen by ``podSelector`` (in the policy's
  namespace), ``namespaceSelector`` (any pod of those namespaces) or both (both must match); a port has a
  protocol (TCP by default) and a number, a range up to ``endPort``, a name (resolved against the destination
  pod's container ports) or nothing (every port of the protocol);
- traffic between a pod and its own node (kubelet probes) is always allowed.

Where the specification leaves the implementation free, this evaluator does what the Amazon VPC CNI's network
policy agent does, the enforcement the stacks run on: an ``ipBlock`` matches any address, pods' included (the
agent compares addresses); a connection to a Service's ClusterIP is checked for egress before kube-proxy's DNAT,
so it passes an egress rule that matches the ClusterIP by ``ipBlock``, or a ``podSelector`` peer (in the peer's
namespaces) that matches the Service's ``spec.selector``, on the port the Service maps to that target port
(getMatchingServiceClusterIPs,
https://github.com/aws/amazon-network-policy-controller-k8s/blob/ecc7e6a79394528bdb397e1fbd927dae64383bec/pkg/resolvers/endpoints.go);
headless Services have no ClusterIP, so their pods are reached directly.
"""

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class ContainerPort:
    port: int
    protocol: str = "TCP"
    name: str = ""


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    ip: str
    node_ip: str
    ports: tuple[ContainerPort, ...] = ()


@dataclass(frozen=True)
class ServicePort:
    port: int
    target_port: Union[int, str]
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    cluster_ip: Optional[str]
    """``None``: headless."""
    selector: Mapping[str, str]
    ports: tuple[ServicePort, ...]
    endpoints: tuple[str, ...] = ()
    """Addresses of a Service without a selector (the ``kubernetes`` Service: the control plane's ENIs)."""


@dataclass
class Cluster:
    """Namespaces (name -> labels), pods, Services and NetworkPolicies (as the API objects, camelCase)."""

    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    policies: list[Mapping[str, Any]] = field(default_factory=list)

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        """A namespace's labels, with the name label the control plane always sets."""
        return {**self.namespaces.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}

    # ------------------------------------------------------------------------------------- connections
    def pod_to_pod(self, src: Pod, dst: Pod, port: int, protocol: str = "TCP") -> bool:
        """``src`` opens a connection to ``dst``'s IP on ``port``."""
        return self._egress(src, dst.ip, dst, port, protocol) and self._ingress(dst, src.ip, src, port, protocol)

    def pod_to_ip(self, src: Pod, ip: str, port: int, protocol: str = "TCP") -> bool:
        """``src`` connects to an address outside the cluster's pods (or to a pod, when ``ip`` is a pod's)."""
        dst = self.pod_by_ip(ip)
        if dst is not None:
            return self.pod_to_pod(src, dst, port, protocol)
        return self._egress(src, ip, None, port, protocol)

    def ip_to_pod(self, ip: str, dst: Pod, port: int, protocol: str = "TCP") -> bool:
        """An address that is no pod's (a node, the control plane, the internet) connects to ``dst``."""
        return self._ingress(dst, ip, None, port, protocol)

    def pod_to_service(self, src: Pod, svc: Service, port: int, protocol: str = "TCP") -> bool:
        """``src`` connects to ``svc``'s ClusterIP on its port ``port``: allowed for egress (before DNAT), then
        received by at least one of the Service's pods on the target port."""
        if svc.cluster_ip is None:
            raise ValueError(f"{svc.name} is headless: connect to its pods")
        sp = next((p for p in svc.ports if p.port == port and p.protocol == protocol), None)
        if sp is None:
            return False
        if not self._egress_to_service(src, svc, sp):
            return False
        if not svc.selector:
            # endpoints outside the pod network receive whatever arrives; a pod among them applies its policies
            return any(
                (b := self.pod_by_ip(ip)) is None or self._ingress(b, src.ip, src, _target_port(sp, b), protocol)
                for ip in svc.endpoints
            )
        backends = [p for p in self.pods if p.namespace == svc.namespace and _subset(svc.selector, p.labels)]
        return any(self._ingress(b, src.ip, src, _target_port(sp, b), protocol) for b in backends)

    def pod_by_ip(self, ip: str) -> Optional[Pod]:
        return next((p for p in self.pods if p.ip == ip), None)

    # --------------------------------------------------------------------------------------- policies
    def _selecting(self, pod: Pod, direction: str) -> list[Mapping[str, Any]]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and direction in policy_types(p)
            and selector_matches(p["spec"].get("podSelector") or {}, pod.labels)
        ]

    def _ingress(self, dst: Pod, src_ip: str, src: Optional[Pod], port: int, protocol: str) -> bool:
        if src_ip == dst.node_ip:
            return True  # a pod cannot block its own node (kubelet probes)
        selecting = self._selecting(dst, "Ingress")
        if not selecting:
            return True
        return any(
            self._peers_match(rule.get("from"), policy, src_ip, src)
            and _ports_match(rule.get("ports"), port, protocol, dst)
            for policy in selecting
            for rule in policy["spec"].get("ingress") or []
        )

    def _egress(self, src: Pod, dst_ip: str, dst: Optional[Pod], port: int, protocol: str) -> bool:
        if dst_ip == src.node_ip:
            return True
        selecting = self._selecting(src, "Egress")
        if not selecting:
            return True
        return any(
            self._peers_match(rule.get("to"), policy, dst_ip, dst)
            and _ports_match(rule.get("ports"), port, protocol, dst)
            for policy in selecting
            for rule in policy["spec"].get("egress") or []
        )

    def _egress_to_service(self, src: Pod, svc: Service, sp: ServicePort) -> bool:
        assert svc.cluster_ip is not None
        selecting = self._selecting(src, "Egress")
        if not selecting:
            return True
        for policy in selecting:
            for rule in policy["spec"].get("egress") or []:
                peers = rule.get("to")
                ports = rule.get("ports")
                # by address: the ClusterIP on the Service's own port
                if self._peers_match(peers, policy, svc.cluster_ip, None) and _ports_match(
                    ports, sp.port, sp.protocol, None
                ):
                    return True
                # by selector: a pod peer that selects the Service's selector, on the port it maps to
                for peer in peers or []:
                    if "ipBlock" in peer:
                        continue
                    if not self._peer_namespace_matches(peer, policy, svc.namespace):
                        continue
                    if not selector_matches(peer.get("podSelector") or {}, svc.selector):
                        continue
                    if not ports or any(_service_port_matches(p, sp) for p in ports):
                        return True
                if not peers and _ports_match(ports, sp.port, sp.protocol, None):
                    return True
        return False

    def _peer_namespace_matches(self, peer: Mapping[str, Any], policy: Mapping[str, Any], namespace: str) -> bool:
        if "namespaceSelector" in peer:
            return selector_matches(peer["namespaceSelector"] or {}, self.namespace_labels(namespace))
        return namespace == policy["metadata"]["namespace"]

    def _peers_match(
        self, peers: Optional[Sequence[Mapping[str, Any]]], policy: Mapping[str, Any], ip: str, pod: Optional[Pod]
    ) -> bool:
        if not peers:
            return True
        for peer in peers:
            if "ipBlock" in peer:
                if ip_in_block(ip, peer["ipBlock"]):
                    return True
                continue
            if pod is None:
                continue
            if not self._peer_namespace_matches(peer, policy, pod.namespace):
                continue
            if "podSelector" in peer and not selector_matches(peer["podSelector"] or {}, pod.labels):
                continue
            return True
        return False


def policy_types(policy: Mapping[str, Any]) -> list[str]:
    """``policyTypes``, or its default: Ingress, plus Egress when there are egress rules."""
    spec = policy["spec"]
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if spec.get("egress") else [])]


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector (``matchLabels`` and ``matchExpressions``, ANDed; empty matches everything)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], list(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown operator {op}")
    return True


def ip_in_block(ip: str, block: Mapping[str, Any]) -> bool:
    addr = ipaddress.ip_address(ip)
    if addr not in ipaddress.ip_network(block["cidr"]):
        return False
    return not any(addr in ipaddress.ip_network(e) for e in block.get("except") or [])


def _subset(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _target_port(sp: ServicePort, pod: Pod) -> int:
    if isinstance(sp.target_port, int):
        return sp.target_port
    named = next((p for p in pod.ports if p.name == sp.target_port and p.protocol == sp.protocol), None)
    return named.port if named else -1


def _ports_match(ports: Optional[Sequence[Mapping[str, Any]]], port: int, protocol: str, dst: Optional[Pod]) -> bool:
    if not ports:
        return True
    for p in ports:
        if (p.get("protocol") or "TCP") != protocol:
            continue
        value = p.get("port")
        if value is None:
            return True
        if isinstance(value, str) and not value.isdigit():
            if dst is not None and any(
                c.name == value and c.protocol == protocol and c.port == port for c in dst.ports
            ):
                return True
            continue
        low = int(float(value))
        high = int(float(p["endPort"])) if p.get("endPort") is not None else low
        if low <= port <= high:
            return True
    return False


def _service_port_matches(policy_port: Mapping[str, Any], sp: ServicePort) -> bool:
    """The controller maps a rule's (target) port to the Service's listening port: a rule on port N allows the
    Service port whose targetPort is N."""
    if (policy_port.get("protocol") or "TCP") != sp.protocol:
        return False
    value = policy_port.get("port")
    if value is None:
        return True
    if isinstance(value, str) and not value.isdigit():
        return value == sp.target_port
    return isinstance(sp.target_port, int) and int(float(value)) == sp.target_port


def container_ports(containers: Iterable[Mapping[str, Any]]) -> tuple[ContainerPort, ...]:
    """The ports a pod's containers declare (named ports resolve against these)."""
    return tuple(
        ContainerPort(int(float(p["containerPort"])), p.get("protocol") or "TCP", p.get("name") or "")
        for c in containers
        for p in c.get("ports") or []
    )


# ------------------------------------------------------------------------------------ from registrations
POD_TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "MPIJob")


def pod_templates(doc: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int]]:
    """``(role, template, replicas)`` of an object that runs pods (an MPIJob has a launcher and workers)."""
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if kind == "MPIJob":
        return [
            (role.lower(), r["template"], int(float(r.get("replicas", 1))))
            for role, r in (spec.get("mpiReplicaSpecs") or {}).items()
        ]
    if kind == "Job":
        return [("pod", spec["template"], int(float(spec.get("parallelism", 1))))]
    if kind in ("Deployment", "StatefulSet"):
        return [("pod", spec["template"], int(float(spec.get("replicas", 1))))]
    if kind == "DaemonSet":
        return [("pod", spec["template"], 1)]
    return []


class AddressBook:
    """Hands out distinct pod, node and ClusterIP addresses."""

    def __init__(self) -> None:
        self._pods = ipaddress.ip_network("10.0.64.0/18").hosts()
        self._nodes = ipaddress.ip_network("10.0.0.0/20").hosts()
        self._services = ipaddress.ip_network("172.20.128.0/17").hosts()

    def pod(self) -> str:
        return str(next(self._pods))

    def node(self) -> str:
        return str(next(self._nodes))

    def service(self) -> str:
        return str(next(self._services))


def add_objects(
    cluster: Cluster, docs: Iterable[Mapping[str, Any]], addresses: AddressBook, *, min_pods: int = 1
) -> None:
    """Add the namespaces, pods (each on a node of its own; at least ``min_pods`` of a Job or of an MPIJob's
    workers, so a job always has peers), Services and NetworkPolicies of Kubernetes objects to ``cluster``."""
    for doc in docs:
        kind, md = doc.get("kind"), doc.get("metadata") or {}
        if kind == "Namespace":
            cluster.namespaces[md["name"]] = dict(md.get("labels") or {})
        elif kind == "NetworkPolicy":
            cluster.policies.append(doc)
        elif kind == "Service":
            spec = doc["spec"]
            ports = tuple(
                ServicePort(
                    int(float(p["port"])),
                    _int_or_name(p.get("targetPort", p["port"])),
                    p.get("protocol") or "TCP",
                )
                for p in spec.get("ports") or []
            )
            headless = spec.get("clusterIP") == "None"
            cluster.services.append(
                Service(
                    md["name"],
                    md["namespace"],
                    None if headless else addresses.service(),
                    dict(spec.get("selector") or {}),
                    ports,
                )
            )
        for role, template, replicas in pod_templates(doc):
            count = max(replicas, min_pods) if (kind, role) in (("Job", "pod"), ("MPIJob", "worker")) else replicas
            pod_spec = template.get("spec") or {}
            ports = container_ports([*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])])
            for i in range(count):
                cluster.pods.append(
                    Pod(
                        name=f"{md['name']}-{role}-{i}",
                        namespace=md["namespace"],
                        labels=dict((template.get("metadata") or {}).get("labels") or {}),
                        ip=addresses.pod(),
                        node_ip=addresses.node(),
                        ports=ports,
                    )
                )


def _int_or_name(value: Any) -> Union[int, str]:
    if isinstance(value, str) and not value.isdigit():
        return value
    return int(float(value))
