"""The NetworkPolicy evaluator (tests/netpol.py) against hand-written policies: what should pass passes and
what should be denied is denied, for each rule of the semantics it implements."""

from typing import Any, Optional

import pytest

from tests.netpol import (
    AddressBook,
    Cluster,
    ContainerPort,
    Pod,
    Service,
    ServicePort,
    add_objects,
    policy_types,
    selector_matches,
)


def _pod(name: str, ns: str = "app", ip: str = "", **labels: str) -> Pod:
    n = int.from_bytes(name.encode(), "big") % 200 + 10
    return Pod(
        name,
        ns,
        labels,
        ip or f"10.1.0.{n}",
        f"10.9.0.{n}",
        (ContainerPort(8080, "TCP", "http"), ContainerPort(53, "UDP", "dns")),
    )


def _policy(name: str, spec: dict[str, Any], ns: str = "app") -> dict[str, Any]:
    return {"kind": "NetworkPolicy", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def _cluster(*policies: dict[str, Any], pods: Optional[list[Pod]] = None) -> Cluster:
    return Cluster(namespaces={"app": {}, "other": {"team": "x"}}, pods=list(pods or []), policies=list(policies))


A, B, C = _pod("a", role="client"), _pod("b", role="server"), _pod("c", "other", role="client")
DENY_ALL = _policy("deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})


def test_no_policy_allows_everything() -> None:
    cl = _cluster(pods=[A, B, C])
    assert cl.pod_to_pod(A, B, 8080) and cl.pod_to_pod(C, B, 1234, "UDP") and cl.pod_to_ip(A, "8.8.8.8", 443)


def test_default_deny_denies_both_directions_but_not_the_node() -> None:
    cl = _cluster(DENY_ALL, pods=[A, B, C])
    assert not cl.pod_to_pod(A, B, 8080)
    assert not cl.pod_to_pod(C, B, 8080), "ingress isolation holds for pods of other namespaces"
    assert not cl.pod_to_ip(A, "8.8.8.8", 443), "egress isolation"
    assert not cl.pod_to_pod(B, C, 8080), "B's egress is isolated, even toward a pod no policy selects"
    assert cl.ip_to_pod(B.node_ip, B, 8080), "the pod's own node (kubelet probes) always reaches it"
    assert not cl.ip_to_pod(A.node_ip, B, 8080), "another node does not"


def test_a_policy_in_another_namespace_selects_nothing_here() -> None:
    cl = _cluster(
        _policy("deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}, ns="other"), pods=[A, B, C]
    )
    assert cl.pod_to_pod(A, B, 8080)
    assert not cl.pod_to_pod(A, C, 8080)


def test_policy_types_default_adds_egress_only_with_egress_rules() -> None:
    assert policy_types(_policy("p", {"podSelector": {}})) == ["Ingress"]
    assert policy_types(_policy("p", {"podSelector": {}, "egress": [{}]})) == ["Ingress", "Egress"]
    # an egress-only policy without policyTypes also isolates ingress
    cl = _cluster(_policy("p", {"podSelector": {"matchLabels": {"role": "server"}}, "egress": [{}]}), pods=[A, B])
    assert not cl.pod_to_pod(A, B, 8080)
    assert cl.pod_to_ip(B, "8.8.8.8", 443)


def test_pod_selector_peers_are_in_the_policys_namespace() -> None:
    allow = _policy(
        "allow",
        {
            "podSelector": {"matchLabels": {"role": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}]}],
        },
    )
    cl = _cluster(allow, pods=[A, B, C])
    assert cl.pod_to_pod(A, B, 8080)
    assert not cl.pod_to_pod(C, B, 8080), "a pod of another namespace with the label does not match a bare podSelector"


def test_namespace_and_pod_selector_in_one_peer_are_anded_in_two_peers_ored() -> None:
    anded = _policy(
        "and",
        {
            "podSelector": {"matchLabels": {"role": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"team": "x"}},
                            "podSelector": {"matchLabels": {"role": "admin"}},
                        }
                    ]
                }
            ],
        },
    )
    cl = _cluster(anded, pods=[A, B, C])
    assert not cl.pod_to_pod(C, B, 8080), "C is in team x but not an admin"
    ored = _policy(
        "or",
        {
            "podSelector": {"matchLabels": {"role": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {"team": "x"}}},
                        {"podSelector": {"matchLabels": {"role": "admin"}}},
                    ]
                }
            ],
        },
    )
    cl = _cluster(ored, pods=[A, B, C])
    assert cl.pod_to_pod(C, B, 8080) and not cl.pod_to_pod(A, B, 8080)


def test_namespace_name_label_is_always_set() -> None:
    by_name = _policy(
        "n",
        {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}]}],
        },
    )
    cl = _cluster(by_name, pods=[A, B, C])
    assert cl.pod_to_pod(C, B, 8080) and not cl.pod_to_pod(A, B, 8080)


def test_ports_protocols_ranges_and_named_ports() -> None:
    def allow(ports: list[dict[str, Any]]) -> Cluster:
        return _cluster(
            _policy("p", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"ports": ports}]}), pods=[A, B]
        )

    assert allow([{"port": 8080}]).pod_to_pod(A, B, 8080)
    assert not allow([{"port": 8080}]).pod_to_pod(A, B, 8080, "UDP"), "protocol defaults to TCP"
    assert not allow([{"port": 8080}]).pod_to_pod(A, B, 8081)
    assert allow([{"port": 30000, "endPort": 32767}]).pod_to_pod(A, B, 31000)
    assert not allow([{"port": 30000, "endPort": 32767}]).pod_to_pod(A, B, 32768)
    assert allow([{"port": "http"}]).pod_to_pod(A, B, 8080), "a named port resolves against the destination's ports"
    assert not allow([{"port": "http"}]).pod_to_pod(A, B, 9090)
    assert allow([{"protocol": "UDP"}]).pod_to_pod(A, B, 5353, "UDP") and not allow([{"protocol": "UDP"}]).pod_to_pod(
        A, B, 5353
    )
    assert allow([]).pod_to_pod(A, B, 1, "SCTP"), "no ports: every port and protocol"


def test_ip_blocks_and_their_exceptions() -> None:
    egress = _policy(
        "e",
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]}}], "ports": [{"port": 80}]}
            ],
        },
    )
    cl = _cluster(egress, pods=[A, B])
    assert cl.pod_to_ip(A, "52.1.2.3", 80)
    assert not cl.pod_to_ip(A, "169.254.169.254", 80)
    assert not cl.pod_to_ip(A, "52.1.2.3", 443)
    assert cl.pod_to_pod(A, B, 80), "an ipBlock matches pods' addresses too (the VPC CNI compares addresses)"


def test_every_selecting_policy_adds_to_what_is_allowed() -> None:
    web = _policy("web", {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"ports": [{"port": 8080}]}]})
    dns = _policy(
        "dns",
        {
            "podSelector": {"matchLabels": {"role": "server"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"port": 53, "protocol": "UDP"}]}],
        },
    )
    cl = _cluster(web, dns, pods=[A, B])
    assert cl.pod_to_pod(A, B, 8080) and cl.pod_to_pod(A, B, 53, "UDP") and not cl.pod_to_pod(A, B, 53)
    assert not cl.pod_to_pod(B, A, 53, "UDP"), "A is selected by web only"


def test_match_expressions() -> None:
    labels = {"tier": "db", "env": "prod"}
    assert selector_matches({}, labels)
    assert selector_matches(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db", "cache"]}]}, labels
    )
    assert not selector_matches({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["x"]}]}, labels)
    assert selector_matches({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, labels)
    assert not selector_matches({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, labels)
    assert not selector_matches(
        {"matchLabels": {"tier": "db"}, "matchExpressions": [{"key": "x", "operator": "Exists"}]}, labels
    )


def test_services_follow_the_vpc_cnis_egress_resolution() -> None:
    db = _pod("db", app="db", shard="1")
    svc = Service("db", "app", "172.20.0.50", {"app": "db"}, (ServicePort(5432, 5432),))
    server_port = Pod(db.name, db.namespace, db.labels, db.ip, db.node_ip, (ContainerPort(5432),))
    to_db = _policy(
        "to-db",
        {
            "podSelector": {"matchLabels": {"role": "client"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "db"}}}], "ports": [{"port": 5432}]}],
        },
    )
    cl = _cluster(to_db, pods=[A, server_port])
    cl.services.append(svc)
    assert cl.pod_to_service(A, svc, 5432), "a podSelector that matches the Service's selector allows its ClusterIP"
    assert cl.pod_to_pod(A, server_port, 5432)
    narrower = _policy(
        "to-db",
        {
            "podSelector": {"matchLabels": {"role": "client"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "db", "shard": "1"}}}]}],
        },
    )
    cl = _cluster(narrower, pods=[A, server_port])
    assert cl.pod_to_pod(A, server_port, 5432)
    assert not cl.pod_to_service(A, svc, 5432), "a selector stricter than the Service's does not cover its ClusterIP"
    by_ip = _policy(
        "to-ip",
        {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "172.20.0.0/16"}}], "ports": [{"port": 5432}]}],
        },
    )
    cl = _cluster(by_ip, pods=[A, server_port])
    assert cl.pod_to_service(A, svc, 5432) and not cl.pod_to_service(A, svc, 5433)
    deny_db = _policy("deny-db", {"podSelector": {"matchLabels": {"app": "db"}}, "policyTypes": ["Ingress"]})
    cl = _cluster(by_ip, deny_db, pods=[A, server_port])
    assert not cl.pod_to_service(A, svc, 5432), "the Service's pods must still accept the connection"


def test_objects_become_pods_services_and_policies() -> None:
    docs = [
        {"kind": "Namespace", "metadata": {"name": "app", "labels": {"team": "y"}}},
        {
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "app"},
            "spec": {
                "parallelism": 1,
                "template": {
                    "metadata": {"labels": {"job": "j"}},
                    "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 29400.0, "name": "c10d"}]}]},
                },
            },
        },
        {
            "kind": "MPIJob",
            "metadata": {"name": "m", "namespace": "app"},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {
                        "replicas": 1,
                        "template": {"metadata": {"labels": {"job": "m"}}, "spec": {"containers": [{}]}},
                    },
                    "Worker": {
                        "replicas": 3,
                        "template": {"metadata": {"labels": {"job": "m"}}, "spec": {"containers": [{}]}},
                    },
                }
            },
        },
        {
            "kind": "Service",
            "metadata": {"name": "s", "namespace": "app"},
            "spec": {"clusterIP": "None", "selector": {"job": "j"}, "ports": [{"port": 29400.0}]},
        },
        DENY_ALL,
    ]
    cl = Cluster()
    add_objects(cl, docs, AddressBook(), min_pods=2)
    assert cl.namespace_labels("app") == {"team": "y", "kubernetes.io/metadata.name": "app"}
    assert [p.name for p in cl.pods] == ["j-pod-0", "j-pod-1", "m-launcher-0", "m-worker-0", "m-worker-1", "m-worker-2"]
    assert cl.pods[0].ports == (ContainerPort(29400, "TCP", "c10d"),)
    assert len({p.ip for p in cl.pods} | {p.node_ip for p in cl.pods}) == 12
    assert cl.services[0].cluster_ip is None and cl.services[0].ports == (ServicePort(29400, 29400),)
    assert cl.policies == [DENY_ALL]
    with pytest.raises(ValueError):
        cl.pod_to_service(cl.pods[0], cl.services[0], 29400)
