"""Property-based tests (hypothesis) of the pure allocators: names fitted to service limits, the default subnet
layout, the size of a pod that fills a node, and the all-reduce bandwidth ceiling.

The example tests elsewhere check the presets' values; these check each allocator's promise over every input of its
domain that hypothesis can reach (a failure prints the smallest input that breaks it).
"""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.catalog.instances import INSTANCE_TYPES, InstanceType
from components.naming import fit_name, fit_prefix, k8s_name
from components.nodeplan import allreduce_busbw_ceiling, efa_profile, network_gbytes_per_s, node_allocatable, pod_size
from stacks.config.base import NAME_RE
from stacks.config.network import DEFAULT_LAYOUT_MAX_ZONES, default_private_subnet_cidrs, default_public_subnet_cidrs

PROPERTY_SETTINGS = settings(max_examples=300, deadline=None)

label_chars = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=90)


# --------------------------------------------------------------------------- names
@PROPERTY_SETTINGS
@given(
    name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-.", min_size=1, max_size=300),
    limit=st.integers(min_value=12, max_value=255),
)
def test_a_fitted_name_fits_is_stable_and_keeps_names_that_fit(name: str, limit: int) -> None:
    fitted = fit_name(name, limit)
    assert len(fitted) <= limit
    assert fitted == fit_name(name, limit)
    if len(name) <= limit:
        assert fitted == name


@PROPERTY_SETTINGS
@given(
    prefix=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=80),
    a=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=20),
    b=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=20),
    limit=st.integers(min_value=20, max_value=63),
)
def test_two_long_names_with_a_shared_start_stay_distinct(prefix: str, a: str, b: str, limit: int) -> None:
    if a == b:
        return
    first, second = f"{prefix}-{a}", f"{prefix}-{b}"
    assert fit_name(first, limit) != fit_name(second, limit)


@PROPERTY_SETTINGS
@given(parts=st.lists(label_chars, min_size=1, max_size=4), limit=st.integers(min_value=20, max_value=63))
def test_k8s_names_are_dns_1123_labels(parts: list[str], limit: int) -> None:
    """Parts of label characters give a DNS-1123 label (start and end alphanumeric, at most ``limit``), whatever
    dashes they begin or end with, and wherever the cut falls."""
    if not any(re.search(r"[a-z0-9]", p) for p in parts):
        return
    name = k8s_name(*parts, limit=limit)
    assert len(name) <= limit
    assert NAME_RE.match(name), name


@PROPERTY_SETTINGS
@given(prefix=label_chars, limit=st.integers(min_value=20, max_value=63))
def test_a_fitted_prefix_ends_in_a_dash_within_the_limit(prefix: str, limit: int) -> None:
    fitted = fit_prefix(prefix, limit)
    assert len(fitted) <= limit and fitted.endswith("-")


# --------------------------------------------------------------------------- the default subnet layout
@PROPERTY_SETTINGS
@given(
    network=st.integers(min_value=0, max_value=2**32 - 1),
    prefix=st.integers(min_value=16, max_value=20),
    zones=st.integers(min_value=1, max_value=DEFAULT_LAYOUT_MAX_ZONES),
)
def test_the_default_subnets_lie_in_the_vpc_and_never_overlap(network: int, prefix: int, zones: int) -> None:
    vpc = ipaddress.ip_network((network, prefix), strict=False)
    assert isinstance(vpc, ipaddress.IPv4Network)
    private = [ipaddress.ip_network(c) for c in default_private_subnet_cidrs(vpc, zones)]
    public = [ipaddress.ip_network(c) for c in default_public_subnet_cidrs(vpc, zones)]
    assert len(private) == zones and len(public) == zones
    subnets = private + public
    assert all(s.subnet_of(vpc) for s in subnets)  # type: ignore[arg-type]
    for i, s in enumerate(subnets):
        for t in subnets[i + 1 :]:
            assert not s.overlaps(t), (s, t)
    # Private subnets hold the pods (one VPC address each): each is a quarter of the VPC.
    assert all(s.prefixlen == prefix + 2 for s in private)


# --------------------------------------------------------------------------- a pod that fills a node
@st.composite
def instance_types(draw: st.DrawFn) -> InstanceType:
    """An instance type as the catalog could hold one: GPU or not, EFA or not, with or without Karpenter's
    allocatable estimates."""
    vcpus = draw(st.sampled_from([2, 4, 8, 16, 32, 48, 64, 96, 128, 192]))
    memory_gib = draw(st.sampled_from([4, 8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1152, 2048]))
    gpus = draw(st.sampled_from([0, 0, 1, 4, 8]))
    efa = draw(st.sampled_from([0, 0, 1, 2, 4, 32]))
    memory_mib = memory_gib * 1024
    estimates = draw(st.booleans())
    return InstanceType(
        name="x.synthetic",
        vcpus=vcpus,
        memory_mib=memory_mib,
        gpus=gpus,
        gpu_model="NVIDIA H100" if gpus else None,
        gpu_memory_mib=81559 if gpus else None,
        max_efa_interfaces=efa,
        network_cards=max(1, efa),
        network_gbps=draw(st.sampled_from([10.0, 100.0, 3200.0])),
        local_nvme_gb=0,
        price_per_hour=None,
        sources=(),
        allocatable_cpu_m=int(vcpus * 1000 * 0.94) if estimates else None,
        allocatable_memory_mib=int(memory_mib * 0.9) - 700 if estimates else None,
    )


def _fits(facts: InstanceType, with_efa: bool) -> None:
    efa = efa_profile(facts) if with_efa else None
    pod, node = pod_size(facts, efa), node_allocatable(facts, efa)
    assert 0 < pod.cpu_millis <= node.cpu_millis, (pod, node)
    assert 0 < pod.memory_mib <= node.memory_mib, (pod, node)
    assert pod.shm_mib <= pod.memory_mib
    assert pod.procs_per_node == max(1, facts.gpus) and pod.threads_per_proc >= 1
    if efa is not None:
        assert pod.efa_devices == efa.interfaces and pod.hugepages_2mi


@PROPERTY_SETTINGS
@given(facts=instance_types(), with_efa=st.booleans())
def test_the_pod_that_fills_a_node_fits_on_it(facts: InstanceType, with_efa: bool) -> None:
    """What the scheduler checks: the pod's requests are within the node's allocatable (after the EFA driver's huge
    pages), for every type an EFA profile exists for (a type big enough to be worth EFA: 32 GiB or more)."""
    if with_efa and (not facts.supports_efa or facts.memory_mib < 32 * 1024 or facts.vcpus < 8):
        return
    _fits(facts, with_efa)


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_the_pod_that_fills_a_node_fits_on_every_catalog_type(name: str) -> None:
    facts = INSTANCE_TYPES[name]
    _fits(facts, False)
    if facts.supports_efa:
        _fits(facts, True)


# --------------------------------------------------------------------------- the all-reduce ceiling
@PROPERTY_SETTINGS
@given(
    facts=instance_types(), nodes=st.integers(min_value=2, max_value=1024), procs=st.integers(min_value=1, max_value=8)
)
def test_the_allreduce_ceiling_lies_between_one_and_two_node_bandwidths(
    facts: InstanceType, nodes: int, procs: int
) -> None:
    """Across nodes the bus bandwidth ceiling is at least the node's bandwidth (N = 2, one rank each: exactly it) and
    below twice it; it never grows with more nodes at the same ranks per node."""
    bandwidth = network_gbytes_per_s(facts)
    ceiling = allreduce_busbw_ceiling(facts, nodes, procs)
    assert bandwidth * (1 - 1e-12) <= ceiling < 2 * bandwidth
    assert allreduce_busbw_ceiling(facts, nodes + 1, procs) <= ceiling * (1 + 1e-12)
