"""Every node group whose pods mount FSx for Lustre installs the Lustre client at bootstrap: the rule over every
stack's registrations, and the control that fails without it."""

import base64
import email
import re
from typing import Any, Iterator

import pytest

from components.catalog.fsx import FSX_CLIENT_HOST
from tests.harness import Program, Registration, run_program, stack_names

STACKS = stack_names()
ROLE_LABEL = "eks-training/role"
#: Node selector keys a managed node group's ``labels`` do not carry (Kubernetes sets them on every node).
TOPOLOGY_KEYS = ("topology.kubernetes.io/zone", "topology.k8s.aws/zone-id", "kubernetes.io/os", "kubernetes.io/arch")
FSX_CSI_DRIVER = "fsx.csi.aws.com"
INSTALL_RE = re.compile(r"\bdnf install -y ([A-Za-z0-9_.+\- ]+?)\s*(?:;|$)", re.M)


def shell_parts(user_data_b64: str) -> list[str]:
    """The ``text/x-shellscript`` parts of a launch template's user data, split as cloud-init splits it."""
    msg = email.message_from_string(base64.b64decode(user_data_b64).decode())
    assert msg.is_multipart(), "an EKS managed node group merges only MIME multi-part user data"
    return [str(part.get_payload()) for part in msg.walk() if part.get_content_type() == "text/x-shellscript"]


def installed_packages(lt: Registration) -> set[str]:
    """Packages the launch template's user data installs with dnf."""
    data = lt.inputs.get("userData")
    if not data:
        return set()
    return {pkg for part in shell_parts(str(data)) for m in INSTALL_RE.finditer(part) for pkg in m.group(1).split()}


def pod_specs(value: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec inside a Kubernetes object's inputs (a dict with ``containers``)."""
    if isinstance(value, dict):
        if isinstance(value.get("containers"), list):
            yield value
        for v in value.values():
            yield from pod_specs(v)
    elif isinstance(value, list):
        for v in value:
            yield from pod_specs(v)


def fsx_claims(p: Program) -> set[str]:
    """Names of the claims bound to an FSx for Lustre PersistentVolume."""
    volumes = {
        str(pv.inputs["metadata"]["name"])
        for pv in p.of_type("kubernetes:core/v1:PersistentVolume")
        if (pv.inputs.get("spec", {}).get("csi") or {}).get("driver") == FSX_CSI_DRIVER
    }
    return {
        str(c.inputs["metadata"]["name"])
        for c in p.of_type("kubernetes:core/v1:PersistentVolumeClaim")
        if c.inputs.get("spec", {}).get("volumeName") in volumes
    }


def host_setup_problems(p: Program) -> tuple[list[str], dict[str, set[str]]]:
    """Groups whose pods mount FSx without their host's Lustre client being installed (or that install it for no
    pod), and the packages each group needs."""
    groups = {str(ng.inputs["labels"][ROLE_LABEL]): ng for ng in p.of_type("aws:eks/nodeGroup:NodeGroup")}
    templates = {lt.id: lt for lt in p.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    claims = fsx_claims(p)
    needed: dict[str, set[str]] = {g: set() for g in groups}
    for r in p.registrations:
        if not r.type.startswith("kubernetes:"):
            continue
        for spec in pod_specs(r.inputs):
            mounted = {
                str((v.get("persistentVolumeClaim") or {}).get("claimName", "")) for v in spec.get("volumes") or []
            }
            if not mounted & claims:
                continue
            selector = {k: v for k, v in (spec.get("nodeSelector") or {}).items() if k not in TOPOLOGY_KEYS}
            where = [g for g, ng in groups.items() if all(ng.inputs["labels"].get(k) == v for k, v in selector.items())]
            assert where, f"{r.name}: a pod that mounts FSx selects no node group ({selector})"
            for g in where:
                needed[g] |= set(FSX_CLIENT_HOST.packages)
    problems = []
    for g, ng in groups.items():
        have = installed_packages(templates[str(ng.inputs["launchTemplate"]["id"])])
        if needed[g] - have:
            problems.append(
                f"node group {g}: its pods mount FSx for Lustre, but its user data does not install "
                f"{sorted(needed[g] - have)} ({FSX_CLIENT_HOST.feature})"
            )
        if have - needed[g]:
            problems.append(
                f"node group {g}: its user data installs {sorted(have - needed[g])}, which no pod of it uses"
            )
    return problems, needed


@pytest.mark.parametrize("stack", STACKS)
def test_every_group_whose_pods_mount_fsx_installs_the_lustre_client(program_for: Any, stack: str) -> None:
    p = program_for(stack, False)
    problems, needed = host_setup_problems(p)
    assert problems == []
    if fsx_claims(p):  # an FSx stack: the rule is not vacuous (its system group runs the volume's one-shot Job)
        assert needed["system"] == set(FSX_CLIENT_HOST.packages)
        assert sum(1 for pkgs in needed.values() if pkgs) >= 2, needed


def test_the_rule_fails_when_the_bootstrap_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug put back: the plan derives no host setup (the AMI's lack of lustre-client unhandled)."""
    import stacks.plan as plan_module

    monkeypatch.setattr(plan_module.Plan, "host_requirements", lambda self, group: ())
    problems, _ = host_setup_problems(run_program("p5", preview=False, fresh=True))
    assert any("node group system" in m for m in problems) and any("node group gpu" in m for m in problems), problems
