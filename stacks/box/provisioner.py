"""The cluster autoscaler's part in the box for ProvisioningRequests of the ``best-effort-atomic-scale-up`` class.

Kueue's ProvisioningRequest check (:class:`stacks.plan.queues.ProvisioningPlan`) asks for a workload's pods in a
``ProvisioningRequest``. On EKS the cluster autoscaler answers it; it cannot run here, so :class:`Provisioner` encodes
its rules, as cluster-autoscaler 1.36.1 has them: it picks a request, provisions it as one decision within the
groups' maximum sizes (the new kwok nodes from :func:`stacks.box.nodes.group_nodes`), books its capacity for
:data:`RESERVATION_TIME`, retries from :data:`INITIAL_RETRY` to :data:`MAX_RETRY`, and fails it after
:data:`EXPIRATION_TIME`. A pod fits a node by its node selector, the node's taints and its requests
(:func:`pod_requests`).

Why, with the autoscaler's files: docs/explanation/box.md, "The autoscaler's stand-in"."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Mapping, Optional

from components.quantities import value_of
from stacks.box.api import BoxError
from stacks.box.cluster import Box, crd_established
from stacks.box.nodes import DEVICES_ANNOTATION, group_nodes
from stacks.box.poller import Poller
from stacks.plan import NodeGroupPlan, Plan
from stacks.plan.queues import PROVISIONING_CLASS

CRD = "provisioningrequests.autoscaling.x-k8s.io"
RESOURCE = "provisioningrequests.autoscaling.x-k8s.io"
#: The autoscaler's retry of a request it found no capacity for, and its booking and expiry times (see the module
#: docstring).
INITIAL_RETRY = datetime.timedelta(minutes=1)
MAX_RETRY = datetime.timedelta(minutes=10)
RESERVATION_TIME = datetime.timedelta(minutes=10)
EXPIRATION_TIME = datetime.timedelta(days=7)
#: The autoscaler's field manager for the conditions it applies (``ApplyProvisioningRequest(..,
#: "cluster-autoscaler")``).
FIELD_MANAGER = "cluster-autoscaler"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def pod_requests(spec: Mapping[str, Any]) -> dict[str, Fraction]:
    """What a pod asks of a node: Kubernetes' effective requests (the larger of any init container's and the sum of the
    containers'), a container's limit standing for a request it lacks (Kueue copies limits to missing requests in the
    PodTemplates it writes, ``UseLimitsAsMissingRequestsInPod``)."""

    def of(c: Mapping[str, Any]) -> dict[str, Fraction]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        return {k: value_of(v) for k, v in merged.items()}

    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for k, v in of(c).items():
            total[k] = total.get(k, Fraction(0)) + v
    for c in spec.get("initContainers") or []:
        for k, v in of(c).items():
            total[k] = max(total.get(k, Fraction(0)), v)
    total["pods"] = Fraction(1)
    return total


def tolerates(tolerations: list[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' ToleratesTaint (k8s.io/api/core/v1/toleration.go)."""
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


@dataclass
class Slot:
    """One node (existing or from a group's template) and what is still free on it."""

    labels: Mapping[str, str]
    taints: list[Mapping[str, Any]]
    free: dict[str, Fraction]

    def admits(self, spec: Mapping[str, Any], asks: Mapping[str, Fraction]) -> bool:
        selector = spec.get("nodeSelector") or {}
        if any(self.labels.get(k) != v for k, v in selector.items()):
            return False
        hard = [t for t in self.taints if t.get("effect") in ("NoSchedule", "NoExecute")]
        if not all(tolerates(spec.get("tolerations") or [], t) for t in hard):
            return False
        return all(self.free.get(r, Fraction(0)) >= v for r, v in asks.items() if v)

    def take(self, asks: Mapping[str, Fraction]) -> None:
        for r, v in asks.items():
            self.free[r] = self.free.get(r, Fraction(0)) - v


def template_capacity(node: Mapping[str, Any]) -> dict[str, Fraction]:
    """A node as its group's template has it: its allocatable and the devices its hardware has (registered by the
    device plugins once they run; the autoscaler's template from the Auto Scaling group's tags lists them too)."""
    alloc = {k: value_of(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    devices = json.loads(((node.get("metadata") or {}).get("annotations") or {}).get(DEVICES_ANNOTATION) or "{}")
    for r, n in devices.items():
        alloc[r] = Fraction(n)
    return alloc


def _condition(req: Mapping[str, Any], kind: str) -> Optional[Mapping[str, Any]]:
    return next((c for c in (req.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def _is_true(req: Mapping[str, Any], kind: str) -> bool:
    c = _condition(req, kind)
    return c is not None and c["status"] == "True"


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


@dataclass
class Decision:
    """What the stand-in did with one request (for the caller's log and the tests)."""

    request: str
    status: str
    reason: str
    added: dict[str, int] = field(default_factory=dict)
    """Group -> nodes created."""


class Provisioner(Poller):
    """The stand-in over the node groups of ``plan`` in ``region``; :meth:`poll` once, or ``with Provisioner(...)``
    to poll in a thread (docs/explanation/box.md, "The autoscaler's stand-in")."""

    def __init__(self, box: Box, plan: Plan, region: str, interval_s: float = 0.5) -> None:
        super().__init__(interval_s)
        self.box, self.plan, self.region = box, plan, region
        self.groups: dict[str, NodeGroupPlan] = {g.name: g for g in plan.all_groups}
        self.decisions: list[Decision] = []
        self._retry: dict[str, datetime.timedelta] = {}

    # --- the API -----------------------------------------------------------------------------------------------

    def _apply_condition(self, req: Mapping[str, Any], kind: str, status: str, reason: str, message: str) -> None:
        meta = req["metadata"]
        doc = {
            "apiVersion": "autoscaling.x-k8s.io/v1",
            "kind": "ProvisioningRequest",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "status": {
                "conditions": [
                    *[c for c in (req.get("status") or {}).get("conditions") or [] if c["type"] != kind],
                    {
                        "type": kind,
                        "status": status,
                        "reason": reason,
                        "message": message,
                        "lastTransitionTime": _now().strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "observedGeneration": meta.get("generation", 1),
                    },
                ]
            },
        }
        self.box.server_side_apply([doc], FIELD_MANAGER, force=True, subresource="status")

    def _pods_of(self, req: Mapping[str, Any]) -> Optional[list[Mapping[str, Any]]]:
        """The request's pods (a spec per pod), or ``None`` when a PodTemplate it names does not exist yet."""
        ns = req["metadata"]["namespace"]
        pods = []
        for ps in req["spec"].get("podSets") or []:
            name = ps["podTemplateRef"]["name"]
            if not self.box.exists("podtemplate", name, "-n", ns):
                return None
            template = self.box.get("podtemplate", name, "-n", ns)["template"]
            pods += [template.get("spec") or {}] * int(ps["count"])
        return pods

    # --- the rules ---------------------------------------------------------------------------------------------

    def _existing(self, requests: list[Mapping[str, Any]], skip: str) -> tuple[list[Slot], dict[str, int]]:
        """Every node as a slot, less the pods bound to it and the capacity booked for Provisioned requests other than
        ``skip``; and each group's current size."""
        slots: dict[str, Slot] = {}
        sizes: dict[str, int] = {}
        for node in self.box.get("nodes")["items"]:
            labels = node["metadata"].get("labels") or {}
            group = labels.get(NODEGROUP_LABEL, "")
            sizes[group] = sizes.get(group, 0) + 1
            if node["spec"].get("unschedulable"):
                continue
            slots[node["metadata"]["name"]] = Slot(labels, node["spec"].get("taints") or [], template_capacity(node))
        for pod in self.box.get("pods", "-A")["items"]:
            where = pod["spec"].get("nodeName")
            if where in slots and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                slots[where].take(pod_requests(pod["spec"]))
        placed = list(slots.values())
        for other in requests:
            if other["metadata"]["name"] == skip or not self._booked(other):
                continue
            for spec in self._pods_of(other) or []:
                asks = pod_requests(spec)
                slot = next((s for s in placed if s.admits(spec, asks)), None)
                if slot is not None:  # TrySchedulePods(breakOnFailure=false): a fake pod that fits nowhere is dropped
                    slot.take(asks)
        return placed, sizes

    def _booked(self, req: Mapping[str, Any]) -> bool:
        """``ShouldCapacityBeBooked`` (provisioningrequest/conditions/conditions.go)."""
        if req["spec"].get("provisioningClassName") != PROVISIONING_CLASS:
            return False
        if _is_true(req, "Failed") or _is_true(req, "BookingExpired"):
            return False
        return _is_true(req, "Provisioned")

    def _expire(self, requests: list[Mapping[str, Any]]) -> None:
        """BookingExpired 10 minutes after Provisioned; Failed 7 days after creation without it (processor.go)."""
        now = _now()
        for req in requests:
            if req["spec"].get("provisioningClassName") != PROVISIONING_CLASS:
                continue
            if _is_true(req, "BookingExpired") or _is_true(req, "Failed"):
                continue
            provisioned = _condition(req, "Provisioned")
            if provisioned is not None and provisioned["status"] == "True":
                if _time(provisioned["lastTransitionTime"]) + RESERVATION_TIME < now:
                    self._apply_condition(
                        req,
                        "BookingExpired",
                        "True",
                        "CapacityReservationTimeExpired",
                        "Capacity reservation time is expired",
                    )
            elif _time(req["metadata"]["creationTimestamp"]) + EXPIRATION_TIME < now:
                self._apply_condition(req, "Failed", "True", "Expired", "ProvisioningRequest is expired")

    def _available(self, req: Mapping[str, Any]) -> bool:
        """``IsAvailableForProvisioning`` (injector.go), with its backoff per request."""
        if _is_true(req, "Failed") or _is_true(req, "Provisioned"):
            self._retry.pop(self._key(req), None)
            return False
        provisioned = _condition(req, "Provisioned")
        if provisioned is None:
            return True
        wait = self._retry.get(self._key(req), INITIAL_RETRY)
        if _time(provisioned["lastTransitionTime"]) + wait < _now():
            self._retry[self._key(req)] = min(2 * wait, MAX_RETRY)
            return True
        return False

    @staticmethod
    def _key(req: Mapping[str, Any]) -> str:
        return f"{req['metadata']['namespace']}/{req['metadata']['name']}"

    def provision(self, req: Mapping[str, Any], requests: list[Mapping[str, Any]]) -> Optional[Decision]:
        """One request, as ``bestEffortAtomicProvClass.Provision`` does (docs/explanation/box.md, "The autoscaler's
        stand-in")."""
        pods = self._pods_of(req)
        if pods is None:
            return None  # Kueue writes the templates before the request; the next pass reads them
        if _condition(req, "Accepted") is None:
            self._apply_condition(
                req, "Accepted", "True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler"
            )
            req = self.box.get(RESOURCE, req["metadata"]["name"], "-n", req["metadata"]["namespace"])
        slots, sizes = self._existing(requests, req["metadata"]["name"])
        unplaced = []
        for spec in pods:  # filterOutSchedulable: the pods that fit the nodes that exist
            asks = pod_requests(spec)
            slot = next((s for s in slots if s.admits(spec, asks)), None)
            if slot is None:
                unplaced.append((spec, asks))
            else:
                slot.take(asks)
        key = self._key(req)
        if not unplaced:
            self._apply_condition(req, "Provisioned", "True", "CapacityIsFound", "Capacity is found in the cluster")
            return Decision(key, "True", "CapacityIsFound")
        # the scale-up, all or nothing within each group's maxSize
        added: dict[str, int] = {}
        new: list[tuple[str, Slot]] = []
        templates = {n: group_nodes(g, self.region, 1)[0] for n, g in self.groups.items()}
        for spec, asks in unplaced:
            slot = next((s for _, s in new if s.admits(spec, asks)), None)
            if slot is None:
                for name, t in templates.items():
                    candidate = Slot(t["metadata"]["labels"], t["spec"].get("taints") or [], template_capacity(t))
                    if candidate.admits(spec, asks):
                        new.append((name, candidate))
                        added[name] = added.get(name, 0) + 1
                        slot = candidate
                        break
            if slot is None:
                return self._not_found(req, "no node group's nodes can hold the pods")
            slot.take(asks)
        over = {n: k for n, k in added.items() if sizes.get(n, 0) + k > self.groups[n].max_size}
        if over:
            why = ", ".join(
                f"{n}: {sizes.get(n, 0)} + {k} > maxSize {self.groups[n].max_size}" for n, k in sorted(over.items())
            )
            return self._not_found(req, why)
        nodes = [
            n
            for name, k in sorted(added.items())
            for n in group_nodes(self.groups[name], self.region, k, first=self._next_index(name))
        ]
        self.box.create(nodes)
        self._apply_condition(req, "Provisioned", "True", "CapacityIsProvisioned", "Capacity is found in the cluster")
        return Decision(key, "True", "CapacityIsProvisioned", added)

    def _next_index(self, group: str) -> int:
        """The next free node number of ``group`` (its nodes are ``<group>-<i>``,
        :func:`stacks.box.nodes.node_name`)."""
        taken = [
            int(n["metadata"]["name"].rpartition("-")[2])
            for n in self.box.get("nodes", "-l", f"{NODEGROUP_LABEL}={group}")["items"]
        ]
        return max(taken) + 1 if taken else 0

    def _not_found(self, req: Mapping[str, Any], why: str) -> Decision:
        self._apply_condition(
            req, "Provisioned", "False", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later."
        )
        return Decision(self._key(req), "False", f"CapacityIsNotFound ({why})")

    def poll(self) -> None:
        if not crd_established(self.box, CRD):
            return
        try:
            requests = self.box.get(RESOURCE, "-A")["items"]
        except BoxError:
            return  # Established, its storage not yet serving (429 "storage is (re)initializing"): the next pass reads
        if not requests:
            return
        self._expire(requests)
        requests = self.box.get(RESOURCE, "-A")["items"]
        for req in sorted(requests, key=lambda r: r["metadata"]["creationTimestamp"]):
            if req["spec"].get("provisioningClassName") != PROVISIONING_CLASS or not self._available(req):
                continue
            decision = self.provision(req, requests)
            if decision is not None:
                self.decisions.append(decision)
            return  # one request per loop, as the autoscaler picks one


def provisioner_for(box: Box, plan: Plan, region: str) -> Optional[Provisioner]:
    """The stand-in a rehearsal of ``plan`` needs: one when Kueue's ProvisioningRequest check guards a flavor (the
    plan's ``admission.provisioning``), else none. The one place the rehearsal, the benchmark and the tests decide
    it."""
    if plan.admission is None or plan.admission.provisioning is None:
        return None
    return Provisioner(box, plan, region)
