"""Every physical name every stack registers fits the limit its service enforces (components/catalog/limits.py,
each limit with its public source), for the shipped stacks and for their variants with every user-given name at
the longest the loader accepts. Mocks accept any name; AWS, EKS, Helm and the Kubernetes API do not."""

import re
from typing import Any, Iterator, Optional

import pytest

from components.catalog.limits import (
    AUTONAME_SUFFIX_LENGTH,
    K8S_LABEL_MAX,
    K8S_LABEL_NAMED_KINDS,
    K8S_LABEL_RE,
    K8S_LABEL_VALUE_MAX,
    K8S_LABEL_VALUE_RE,
    K8S_PORT_NAME_MAX,
    K8S_RFC1035_RE,
    K8S_SUBDOMAIN_MAX,
    K8S_SUBDOMAIN_RE,
    NAME_LIMITS,
)
from tests.harness import UNKNOWN, Program, Registration, stack_names
from tests.variants import stress_program

STACKS = stack_names()
#: pulumi-kubernetes names an object without ``metadata.name`` ``<logical name>-<8 random characters>``.
K8S_AUTONAME_SUFFIX_LENGTH = 9
#: Types that are not Kubernetes objects with their own name (providers, Helm releases, manifest files).
NOT_OBJECTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "pulumi:providers:")


def _programs(program_for: Any, stack: str, variant: str) -> Program:
    return program_for(stack, False) if variant == "shipped" else stress_program(stack)


def _aws_problems(r: Registration) -> Iterator[str]:
    for (rtype, field), limit in NAME_LIMITS.items():
        if rtype != r.type:
            continue
        value = r.inputs.get(field)
        if value is None and limit.autonamed and not r.inputs.get(f"{field}Prefix"):
            # Pulumi names it after the logical name with a random suffix
            value = f"{r.name}-{'a' * (AUTONAME_SUFFIX_LENGTH - 1)}"
        if not isinstance(value, str) or value == UNKNOWN:
            continue
        if len(value) > limit.max_length:
            yield (
                f"{r.type} {r.name}: {field} {value!r} has {len(value)} characters, the limit is {limit.max_length} "
                f"({limit.source})"
            )
        if limit.pattern and not re.fullmatch(limit.pattern, value):
            yield f"{r.type} {r.name}: {field} {value!r} does not match {limit.pattern} ({limit.source})"


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{path}[{i}]")


def _kind(r: Registration) -> str:
    return r.type.rsplit(":", 1)[1]


def _k8s_name(r: Registration) -> Optional[str]:
    md = r.inputs.get("metadata") or {}
    name = md.get("name")
    if name is None:
        return f"{r.name}-{'a' * (K8S_AUTONAME_SUFFIX_LENGTH - 1)}"
    return name if isinstance(name, str) and name != UNKNOWN else None


def _label_problems(where: str, labels: Any) -> Iterator[str]:
    if not isinstance(labels, dict):
        return
    for k, v in labels.items():
        if not isinstance(v, str) or v == UNKNOWN:
            continue
        if len(v) > K8S_LABEL_VALUE_MAX or not re.fullmatch(K8S_LABEL_VALUE_RE, v):
            yield (
                f"{where}: label {k}={v!r} is not a label value (at most {K8S_LABEL_VALUE_MAX} characters; k8s-labels)"
            )


def _k8s_problems(r: Registration) -> Iterator[str]:
    kind = _kind(r)
    name = _k8s_name(r)
    where = f"{kind} {r.name}"
    if name is not None:
        if kind in K8S_LABEL_NAMED_KINDS:
            pattern = K8S_RFC1035_RE if kind == "Service" else K8S_LABEL_RE
            if len(name) > K8S_LABEL_MAX or not re.fullmatch(pattern, name):
                yield f"{where}: name {name!r} must be a DNS label of at most {K8S_LABEL_MAX} characters (k8s-names)"
        elif len(name) > K8S_SUBDOMAIN_MAX or not re.fullmatch(K8S_SUBDOMAIN_RE, name):
            yield f"{where}: name {name!r} is not a DNS subdomain (k8s-names)"
    for path, value in _walk(r.inputs):
        if path.endswith(".labels") or path.endswith(".matchLabels") or path.endswith(".nodeSelector"):
            yield from _label_problems(f"{where} {path}", value)
        if isinstance(value, dict) and isinstance(value.get("containers"), list):
            for c in [*value["containers"], *(value.get("initContainers") or [])]:
                cname = c.get("name")
                if isinstance(cname, str) and (len(cname) > K8S_LABEL_MAX or not re.fullmatch(K8S_LABEL_RE, cname)):
                    yield f"{where} {path}: container name {cname!r} is not a DNS label"
                for port in c.get("ports") or []:
                    pname = port.get("name")
                    if isinstance(pname, str) and len(pname) > K8S_PORT_NAME_MAX:
                        yield (
                            f"{where} {path}: port name {pname!r} is longer than {K8S_PORT_NAME_MAX} "
                            "(k8s-container-port)"
                        )
            sub = value.get("subdomain")
            if (
                isinstance(sub, str)
                and sub != UNKNOWN
                and (len(sub) > K8S_LABEL_MAX or not re.fullmatch(K8S_LABEL_RE, sub))
            ):
                yield f"{where} {path}: subdomain {sub!r} is not a DNS label"
    spec = r.inputs.get("spec") or {}
    if kind == "Job" and name is not None and spec.get("completionMode") == "Indexed":
        hostname = f"{name}-{int(spec.get('completions') or 1) - 1}"
        if len(hostname) > K8S_LABEL_MAX:
            yield f"{where}: the last pod's hostname {hostname!r} is longer than {K8S_LABEL_MAX} (k8s-job-name)"
    if kind == "MPIJob" and name is not None and not re.fullmatch(K8S_RFC1035_RE, name):
        # the MPI Operator names the job's headless Service after the MPIJob (newJobService in kubeflow/mpi-operator
        # pkg/controller/mpi_job_controller.go), and a Service takes an RFC 1035 label
        yield f"{where}: name {name!r} must start with a letter: the MPI Operator's Service of this name is refused"
    if kind == "MPIJob" and name is not None:
        replicas = (spec.get("mpiReplicaSpecs") or {}).get("Worker", {}).get("replicas", 1)
        for hostname in (f"{name}-launcher", f"{name}-worker-{int(replicas) - 1}"):
            if len(hostname) > K8S_LABEL_MAX:
                yield f"{where}: pod hostname {hostname!r} is longer than {K8S_LABEL_MAX}"


def problems(program: Program) -> list[str]:
    """Every name in ``program`` that a service would refuse."""
    out: list[str] = []
    for r in program.registrations:
        out.extend(_aws_problems(r))
        if r.type.startswith("kubernetes:") and not r.type.startswith(NOT_OBJECTS):
            out.extend(_k8s_problems(r))
    return out


@pytest.mark.parametrize("variant", ["shipped", "longest-names"])
@pytest.mark.parametrize("stack", STACKS)
def test_every_physical_name_fits_its_service(program_for: Any, stack: str, variant: str) -> None:
    program = _programs(program_for, stack, variant)
    found = problems(program)
    assert not found, "\n".join(found)
    checked = {t for (t, _f) in NAME_LIMITS} & {r.type for r in program.registrations}
    # the table covers what the stack names: clusters, node groups, roles, log groups, Helm releases at least
    assert {
        "eks:index:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "aws:iam/role:Role",
        "aws:cloudwatch/logGroup:LogGroup",
    } <= checked


def test_the_variant_really_uses_the_longest_names() -> None:
    """The long-name variant reaches the loader's bounds (else the test above proves little)."""
    program = stress_program("dev")
    cluster = program.one("eks:index:Cluster").inputs["name"]
    assert len(cluster) == 40
    prefixes = [r.inputs["nodeGroupNamePrefix"] for r in program.of_type("aws:eks/nodeGroup:NodeGroup")]
    # the raw prefix would be <40>-<20>- = 62 characters: shortened with a stable hash
    assert all(
        len(p) <= NAME_LIMITS[("aws:eks/nodeGroup:NodeGroup", "nodeGroupNamePrefix")].max_length for p in prefixes
    )
    assert any(re.search(r"-[0-9a-f]{8}-$", p) for p in prefixes), prefixes


def test_the_checker_catches_what_a_service_refuses() -> None:
    """The checks themselves fail on names a service refuses."""

    def reg(t: str, name: str, inputs: dict[str, Any]) -> Registration:
        return Registration(t, name, f"urn:{name}", "", True, False, "", [], {}, inputs, None, "")

    bad = Program(
        "x",
        False,
        [
            reg("aws:eks/nodeGroup:NodeGroup", "ng", {"nodeGroupNamePrefix": "p" * 38}),
            reg("aws:iam/role:Role", "r" * 57, {}),  # auto-named: 57 + 8 > 64
            reg("aws:kms/alias:Alias", "a", {"name": "alias/has space"}),
            reg("kubernetes:core/v1:Service", "s", {"metadata": {"name": "1-starts-with-digit"}}),
            reg("kubernetes:kubeflow.org/v2beta1:MPIJob", "m", {"metadata": {"name": "2node-hello"}, "spec": {}}),
            reg(
                "kubernetes:batch/v1:Job",
                "j",
                {"metadata": {"name": "j" * 62}, "spec": {"completionMode": "Indexed", "completions": 12}},
            ),
            reg(
                "kubernetes:apps/v1:Deployment", "d", {"metadata": {"name": "d", "labels": {"a": "v" * 64}}, "spec": {}}
            ),
            reg(
                "kubernetes:core/v1:Pod",
                "p",
                {
                    "metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "ports": [{"name": "much-too-long-port"}]}]},
                },
            ),
        ],
        {},
        [],
    )
    found = problems(bad)
    assert len(found) == 8, found
