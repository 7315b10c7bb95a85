"""Kueue in the box: the release the stacks install (``components.admission``), run out of cluster.

What the chart would install is read from the pinned module :data:`MODULE` in the Go module cache: the CRDs
(:func:`crds`) and the webhook configurations, pointed at this box (:func:`webhook_configurations`). :class:`Kueue`
runs the manager with the stack's Configuration and what running outside a pod changes (:func:`box_configuration`).
:func:`workload_conditions` says why a job waits.

Why: docs/explanation/box.md, "The run"."""

from __future__ import annotations

import datetime
import fcntl
import ipaddress
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from components.admission import FRAMEWORKS
from components.catalog import HELM_CHARTS
from components.workloads.job_objects import JOB_OBJECTS
from stacks.box import build as box_build
from stacks.box.api import BoxError
from stacks.box.cluster import Box, establish_crds
from stacks.box.gomodules import module_dir
from stacks.box.processes import terminate
from stacks.ports import free_port
from stacks.yaml_text import dump_yaml_documents, load_yaml_documents

MODULE = "sigs.k8s.io/kueue"
CRD_DIR = "config/components/crd/bases"
WEBHOOKS = "config/components/webhook/manifests.yaml"
#: Where the manager reads its metrics certificate when internal certificate management is off (hard-coded).
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: Feature gates the box sets whatever the release's: the visibility API server needs an in-cluster APIService.
BOX_FEATURE_GATES = {"VisibilityOnDemand": False}


def is_kueue_chart(chart: str) -> bool:
    """A Helm release's ``chart`` input names the catalog's Kueue chart (by name or OCI reference)."""
    c = HELM_CHARTS["kueue"]
    return chart in (c.chart, f"{c.repo}/{c.chart}")


def kueue_dir(folder: str = "kueue") -> Path:
    """Kueue's module as the box module ``folder`` pins it: ``kueue`` (the release the stacks install, pinned with the
    catalog's chart) or ``kueue-previous`` (the release pinned before it, which the box upgrades from)."""
    pinned = box_build.MODULES[folder].version()
    if folder == "kueue" and pinned.lstrip("v") != HELM_CHARTS["kueue"].version.lstrip("v"):
        raise BoxError(
            f"components/catalog pins the kueue chart {HELM_CHARTS['kueue'].version} but box/kueue/go.mod "
            f"pins {pinned}: pin both at the same version"
        )
    return module_dir(folder, MODULE)


def crds(folder: str = "kueue") -> list[dict[str, Any]]:
    """Kueue's CustomResourceDefinitions, as the chart of the release ``folder`` pins installs them."""
    out = []
    for path in sorted((kueue_dir(folder) / CRD_DIR).glob("*.yaml")):
        out += load_yaml_documents(path.read_text())
    return out


def webhook_configurations(port: int, ca_pem: bytes, folder: str = "kueue") -> list[dict[str, Any]]:
    """The webhook configurations of the release ``folder`` pins, pointed at ``https://127.0.0.1:<port>``
    (docs/explanation/box.md, "The run")."""
    import base64

    # the integrations the stacks enable (:data:`components.admission.FRAMEWORKS`): their API groups and resources
    kept = {(o.group, o.resource) for o in JOB_OBJECTS.values() if o.kueue_framework in FRAMEWORKS}
    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in load_yaml_documents((kueue_dir(folder) / WEBHOOKS).read_text()):
        hooks = []
        for hook in doc["webhooks"]:
            rules = hook.get("rules") or []
            ours = any(
                g == "kueue.x-k8s.io" or (g, r) in kept
                for rule in rules
                for g in rule["apiGroups"]
                for r in rule["resources"]
            )
            if not ours:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            hooks.append(hook)
        doc["metadata"] = {"name": f"kueue-{doc['metadata']['name']}"}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


def _certificates(folder: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 signed by it (``tls.crt``, ``tls.key`` in ``folder``); the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "box-kueue-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "tls.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca.public_bytes(serialization.Encoding.PEM)


def _metrics_certificate() -> None:
    """A pair at :data:`METRICS_CERT_DIR` (written once, shared by every box: metrics are off, nothing connects)."""
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return
    try:
        METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
        with open(METRICS_CERT_DIR.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (METRICS_CERT_DIR / "tls.key").is_file():
                staging = METRICS_CERT_DIR.parent / ".staging"
                _certificates(staging)
                for name in ("tls.crt", "tls.key"):
                    (staging / name).rename(METRICS_CERT_DIR / name)
    except PermissionError as exc:
        raise BoxError(
            f"Kueue reads a metrics certificate from {METRICS_CERT_DIR} when run out of cluster, which this "
            f"user cannot write ({exc}): create the folder writable for this user"
        ) from exc


def box_configuration(
    configuration: Mapping[str, Any], *, webhook_port: int, health_port: int, cert_dir: Path
) -> dict[str, Any]:
    """The stack's Configuration with the out-of-cluster changes (see the module docstring)."""
    cfg = dict(configuration)
    cfg["leaderElection"] = {"leaderElect": False}
    cfg["internalCertManagement"] = {"enable": False}
    cfg["webhook"] = {**(cfg.get("webhook") or {}), "port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)}
    cfg["health"] = {**(cfg.get("health") or {}), "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    cfg["metrics"] = {**(cfg.get("metrics") or {}), "bindAddress": "0"}
    return cfg


class Kueue:
    """The Kueue manager of one box (:meth:`start` once its CRDs are Established; :meth:`stop`), of the release the
    box module ``folder`` pins (:func:`kueue_dir`)."""

    def __init__(
        self,
        box: Box,
        binary: Path,
        configuration: Mapping[str, Any],
        log_dir: Optional[Path] = None,
        feature_gates: Optional[Mapping[str, bool]] = None,
        folder: str = "kueue",
    ) -> None:
        self.box, self.binary, self.configuration, self.folder = box, binary, dict(configuration), folder
        self.feature_gates = {**dict(feature_gates or {}), **BOX_FEATURE_GATES}
        """The release's gates (:func:`kueue_release_feature_gates`) and the box's own (:data:`BOX_FEATURE_GATES`)."""
        self.home = box.home / "kueue"
        self.log_path = (log_dir or box.home) / "kueue.log"
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.webhook_port = self.health_port = 0

    def start(self, timeout_s: float = 90.0) -> float:
        """Start the manager, wait until its webhooks serve, register them; returns the seconds it took."""
        start = time.monotonic()
        establish_crds(self.box, [d["metadata"]["name"] for d in crds(self.folder)])
        _metrics_certificate()
        ca = _certificates(self.home / "certs")
        log = open(self.log_path, "ab")
        command = [
            str(self.binary),
            f"--config={self.home / 'config.yaml'}",
            f"--kubeconfig={self.box.kubeconfig}",
            "--feature-gates=" + ",".join(f"{n}={str(v).lower()}" for n, v in sorted(self.feature_gates.items())),
            "--zap-log-level=2",
        ]

        def launch() -> int:
            """The manager started on two ports free now; returns where its log starts."""
            self.webhook_port, self.health_port = free_port(), free_port()
            config = box_configuration(
                self.configuration,
                webhook_port=self.webhook_port,
                health_port=self.health_port,
                cert_dir=self.home / "certs",
            )
            (self.home / "config.yaml").write_text(dump_yaml_documents([config]))
            log.flush()
            at = self.log_path.stat().st_size
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            return at

        at = launch()
        deadline = time.monotonic() + timeout_s
        restarts = 0
        while not self._ready():
            assert self.process is not None
            if self.process.poll() is not None:
                # The manager exits, and its Deployment would restart the pod; so does the box (at most 3 times):
                # - a CRD Established before the apiserver's discovery serves it;
                # - a port taken before it listened (:mod:`stacks.ports`; a cluster gives the pod ports of its own).
                tail = self.log_path.read_bytes()[at:].decode(errors="replace")[-3000:]
                if restarts < 3 and ("no matches for kind" in tail or "address already in use" in tail):
                    restarts += 1
                    time.sleep(1.0)
                    at = launch()
                    continue
                raise BoxError(f"Kueue exited ({self.process.returncode}); its log ends:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise BoxError(f"Kueue not ready after {timeout_s:.0f} s; its log ends:\n{self.log()[-3000:]}")
            time.sleep(0.2)
        self.box.apply(webhook_configurations(self.webhook_port, ca, self.folder))
        return time.monotonic() - start

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as r:
                if r.status != 200:
                    return False
            ctx = ssl.create_default_context(cafile=str(self.home / "certs" / "tls.crt"))
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            with socket.create_connection(("127.0.0.1", self.webhook_port), timeout=2) as sock:
                with ctx.wrap_socket(sock):
                    return True
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        terminate(self.process)


#: Kueue's Workload resource, as kubectl names it (and its CRD's name).
WORKLOAD_CRD = "workloads.kueue.x-k8s.io"


def workload_conditions(box: Box, namespace: str) -> list[str]:
    """One line per Workload that is not admitted: its job and the reason Kueue gives (its QuotaReserved condition)."""
    out = []
    for wl in box.get(WORKLOAD_CRD, "-n", namespace)["items"]:
        conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        if (conds.get("Admitted") or {}).get("status") == "True" or (conds.get("Finished") or {}).get(
            "status"
        ) == "True":
            continue
        owner: dict[str, Any] = next(iter(wl["metadata"].get("ownerReferences") or []), {})
        why = conds.get("QuotaReserved") or conds.get("Evicted") or {}
        if why.get("status") == "True" and wl["status"].get("admissionChecks"):
            why = _second_pass_failure(box, wl) or why
        out.append(
            f"{namespace}/{owner.get('name', wl['metadata']['name'])}: queued, not admitted: "
            f"{why.get('reason', 'Pending')}: {why.get('message', '')}"
        )
    return out


def _second_pass_failure(box: Box, wl: Mapping[str, Any]) -> Optional[dict[str, str]]:
    """Why Kueue has not placed a workload that holds its quota and passed its checks: the last ``SecondPassFailed``
    event (its topology assignment on the nodes the ProvisioningRequest brought, pkg/scheduler/scheduler.go at
    v0.19.1; the Workload's conditions still say QuotaReserved)."""
    meta = wl["metadata"]
    events = box.get(
        "events",
        "-n",
        meta["namespace"],
        "--field-selector",
        f"involvedObject.name={meta['name']},reason=SecondPassFailed",
    )["items"]
    if not events:
        return None
    last = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return {"reason": "SecondPassFailed", "message": last.get("message") or last.get("note") or ""}


def kueue_release_feature_gates(values: Mapping[str, Any]) -> dict[str, bool]:
    """The feature gates a Kueue release's values set (the chart's ``controllerManager.featureGates``, which its
    manager Deployment passes as ``--feature-gates``, charts/kueue/templates/_helpers.tpl ``kueue.featureGates``)."""
    return {g["name"]: bool(g["enabled"]) for g in (values.get("controllerManager") or {}).get("featureGates") or []}


def kueue_release_configuration(values: Mapping[str, Any]) -> dict[str, Any]:
    """The Configuration a Kueue release's values carry (the chart's ``managerConfig.controllerManagerConfigYaml``)."""
    text = ((values.get("managerConfig") or {}).get("controllerManagerConfigYaml")) or ""
    if not text:
        raise BoxError("the Kueue release has no managerConfig.controllerManagerConfigYaml")
    return dict(yaml.safe_load(text))
