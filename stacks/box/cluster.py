"""One box: a kwokctl cluster of the locally built binaries (``--runtime binary``), its kubeconfig, and kubectl (its
reads and the box's own writes go over the REST API, :mod:`stacks.box.api`).

kwokctl (https://kwok.sigs.k8s.io/docs/user/kwokctl-manage-cluster/) runs etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and the kwok controller as local processes; its state (logs, certificates,
pids) lives under ``KWOK_WORKDIR`` = the box's work folder, never in the user's ``~/.kwok`` or ``~/.kube/config``.
The kwok controller plays every node's kubelet with the Stages the project ships (``stages.yaml`` in this folder:
pods start, run for a duration and end with an exit code given by annotations) plus kwok's own node Stages, read
from the pinned kwok module (kwokctl replaces all of its default Stages once any is given). A box with the whole
control plane also serves containers' logs from files (kwok's ``Logs`` objects, enabled with ``--enable-crds``), which
:mod:`stacks.box.podlogs` writes.

A box is created fresh and deleted, never stopped and started whole: a restarted kwok controller leaves pods
unprocessed for minutes. An upgrade (:meth:`Box.upgrade`) restarts only the control plane.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence
from urllib.parse import quote

from stacks.box import build as box_build
from stacks.box.api import Api, BoxError, NotRead
from stacks.box.build import SUFFIXES
from stacks.box.processes import host_lock, process_alive, stop_process
from stacks.yaml_text import dump_yaml_documents

#: The project's pod Stages (see the module docstring).
POD_STAGES = Path(__file__).with_name("stages.yaml")
#: kwok's node Stages (relative to the kwok module): initialise a node as Ready, keep its lease renewed.
KWOK_NODE_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
)
#: The field manager of everything the box applies.
FIELD_MANAGER = "eks-training-box"

#: How long a component of the control plane has to stop gracefully in an upgrade (:meth:`Box.upgrade`) before it is
#: killed: kube-apiserver's graceful shutdown waits for its open requests (a minute here), which an upgrade of the box
#: need not.
STOP_GRACE_S = 10.0
#: The components an upgrade of the control plane replaces (:meth:`Box.upgrade`).
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def default_workdir() -> Path:
    return box_build.cache_root().parent / "clusters"


def add_box_options(parser: argparse.ArgumentParser, *, name_default: Optional[str], name_help: str) -> None:
    """A box command's ``--name`` (which box) and ``--workdir`` (where the boxes keep their state)."""
    parser.add_argument("--name", default=name_default, help=name_help)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=default_workdir(),
        help=f"folder of the boxes' state (default {default_workdir()})",
    )


def log(message: str) -> None:
    """A box command's progress line, on stderr."""
    print(message, file=sys.stderr, flush=True)


def kwok_module_dir(go: str = "go") -> Path:
    """Where the Go module cache holds the pinned kwok module (downloaded by the build)."""
    proc = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=box_build.MODULES["kwok"].path,
        capture_output=True,
        text=True,
        env=dict(os.environ, GOFLAGS="-mod=readonly"),
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BoxError(f"cannot locate the kwok module: {proc.stderr.strip()}")
    return Path(proc.stdout.strip())


#: The controller manager and the scheduler run without leader election. With it (their default), a busy machine that
#: stalls the apiserver past their lease's 10 s renew deadline makes them exit, and nothing in the box restarts them.
#: kwokctl appends each patch's ``--key=value`` (sigs.k8s.io/kwok v0.8.0 ``pkg/kwokctl/runtime/util.go``).
NO_LEADER_ELECTION = """\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: leader-elect
    value: "false"
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
"""


def stages_config(go: str = "go") -> str:
    """The kwokctl configuration: kwok's node Stages, the project's pod Stages and :data:`NO_LEADER_ELECTION`, as one
    YAML stream."""
    module = kwok_module_dir(go)
    docs = [(module / rel).read_text() for rel in KWOK_NODE_STAGES] + [POD_STAGES.read_text(), NO_LEADER_ELECTION]
    return "\n---\n".join(d.strip() for d in docs) + "\n"


@dataclass
class Box:
    """A box named ``name`` whose state lives in ``workdir/<name>``."""

    name: str = "eks-training"
    workdir: Path = field(default_factory=default_workdir)
    #: Binaries by command name (:func:`stacks.box.build.build`); built or reused on :meth:`up` when empty.
    binaries: dict[str, Path] = field(default_factory=dict)
    #: ``"kubernetes"`` (the default minor, the whole control plane), ``"kubernetes-previous"`` (the minor before it,
    #: the whole control plane: what an upgrade to the default starts from, :meth:`upgrade`) or
    #: ``"kubernetes-oldest"`` (the oldest minor's kube-apiserver only, no scheduler nor controller manager: objects
    #: are validated, nothing runs).
    control_plane: str = "kubernetes"
    _api: Optional["Api"] = field(default=None, init=False, repr=False, compare=False)
    #: The CRDs seen Established (:func:`crd_established`), until :meth:`down`.
    established_crds: set[str] = field(default_factory=set, init=False, repr=False, compare=False)

    @property
    def home(self) -> Path:
        return self.workdir / self.name

    @property
    def kubeconfig(self) -> Path:
        return self.home / "kubeconfig"

    def _env(self) -> dict[str, str]:
        return dict(os.environ, KWOK_WORKDIR=str(self.home / "kwok"))

    def _binaries(self) -> dict[str, Path]:
        if not self.binaries:
            self.binaries = box_build.build(["etcd", "kwok", "kubernetes", self.control_plane])
        return self.binaries

    def up(self, timeout_s: float = 120.0, *, again: bool = True) -> Path:
        """Create the box afresh (a left-over box of the same name is deleted first); returns the kubeconfig path.
        A component that exited as the box came up (the controller manager gives the apiserver 10 s to be healthy,
        kubernetes ``cmd/kube-controller-manager/app/controllermanager.go``, which a busy machine can outlast) makes
        it create the box once more (``again``), then fail naming it."""
        self._create(timeout_s)
        gone = self.exited()
        if gone and again:
            return self.up(timeout_s, again=False)
        if gone:
            raise BoxError(self.exit_report(gone))
        return self.kubeconfig

    def exited(self) -> list[str]:
        """The box's components (etcd, the apiserver, the controller manager, the scheduler, kwok) whose process is
        gone; nothing restarts them."""
        gone = []
        for f in sorted((self.home / "kwok" / "clusters" / self.name / "pids").glob("*.pid")):
            try:
                pid = int(f.read_text().strip())
            except (OSError, ValueError):
                pid = 0
            if not process_alive(pid):
                gone.append(f.stem)
        return gone

    def exit_report(self, gone: Sequence[str]) -> str:
        """What to say of the components ``gone``: each one's log's end."""
        logs = self.home / "kwok" / "clusters" / self.name / "logs"
        tails = []
        for name in gone:
            log = logs / f"{name}.log"
            tails.append(
                f"{name}'s log ends:\n" + (log.read_text(errors="replace")[-600:] if log.exists() else "(none)")
            )
        return f"the box's {', '.join(gone)} exited; " + "\n".join(tails)

    def _create(self, timeout_s: float) -> None:
        """``kwokctl create cluster`` of a fresh box."""
        bins = self._binaries()
        self.down()
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "kwokctl.yaml"
        config.write_text(stages_config())
        apiserver = bins["kube-apiserver" + SUFFIXES.get(self.control_plane, "")]
        controllers = SUFFIXES.get(self.control_plane, "") if self.control_plane != "kubernetes-oldest" else ""
        argv = [
            str(bins["kwokctl"]),
            "--name",
            self.name,
            "create",
            "cluster",
            "--runtime",
            "binary",
            "--config",
            str(config),
            "--kubeconfig",
            str(self.kubeconfig),
            "--etcd-binary",
            str(bins["etcd"]),
            "--kube-apiserver-binary",
            str(apiserver),
            "--kube-controller-manager-binary",
            str(bins["kube-controller-manager" + controllers]),
            "--kube-scheduler-binary",
            str(bins["kube-scheduler" + controllers]),
            "--kwok-controller-binary",
            str(bins["kwok"]),
            "--disable-qps-limits",
            "--wait",
            f"{int(timeout_s)}s",
        ]
        if self.control_plane == "kubernetes-oldest":
            argv += ["--disable-kube-scheduler", "--disable-kube-controller-manager"]
        else:  # kwok serves the containers' logs the box writes (stacks.box.podlogs)
            argv += ["--enable-crds", "Logs"]
        # kwokctl picks its components' ports by counting down from 32767 in each process and taking the first one
        # nothing listens on at that instant (sigs.k8s.io/kwok v0.8.0 pkg/utils/net/unused_port.go), so two boxes
        # created at once get the same ports and break each other. One creation at a time on the machine: with
        # --wait, every component listens before the lock is let go, and the next creation counts past them.
        with host_lock("kwokctl-create"):
            proc = subprocess.run(argv, env=self._env(), capture_output=True, text=True, timeout=timeout_s + 60)
        if proc.returncode != 0:
            raise BoxError(f"kwokctl create cluster failed ({proc.returncode}):\n{proc.stderr[-3000:]}")

    def upgrade(self, control_plane: str = "kubernetes", timeout_s: float = 120.0) -> None:
        """Replace the control plane (kube-apiserver, controller manager, scheduler) with ``control_plane``'s minor on
        the same etcd data, as an EKS control plane upgrade does, while etcd and the nodes (kwok) keep running: the
        three processes stop, the binaries linked in the cluster's ``bin/`` folder change, and ``kwokctl start
        cluster`` starts what is not running (sigs.k8s.io/kwok v0.8.0 ``pkg/kwokctl/runtime/binary``: each component
        runs its ``bin/`` link, its pid in ``pids/<name>.pid``)."""
        bins = self._binaries()
        if not all(f"{c}{SUFFIXES.get(control_plane, '')}" in bins for c in CONTROL_PLANE):
            bins.update(box_build.build([control_plane]))
        cluster = self.home / "kwok" / "clusters" / self.name
        # while the box is down its ports are free: no other box may be created meanwhile and take them (up())
        with host_lock("kwokctl-create"):
            for command in CONTROL_PLANE:
                stop_process(cluster / "pids" / f"{command}.pid", STOP_GRACE_S)
                link = cluster / "bin" / command
                link.unlink()
                link.symlink_to(bins[command + SUFFIXES.get(control_plane, "")])
            started = subprocess.run(
                [str(bins["kwokctl"]), "--name", self.name, "start", "cluster"],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=timeout_s + 60,
            )
        if started.returncode != 0:
            raise BoxError(f"kwokctl start cluster failed ({started.returncode}):\n{started.stderr[-3000:]}")
        self.control_plane = control_plane
        self._api = None  # the new minor's discovery
        # kwokctl waits for /version only; EKS switches API servers without a gap, so the box waits until the new one
        # serves every resource (a custom resource's storage answers 429 while it initialises)
        self.wait_for(self._serving, timeout_s=timeout_s, what="the upgraded control plane to serve every resource")

    def _serving(self) -> bool:
        """The apiserver is ready and lists every served version of every CustomResourceDefinition."""
        try:
            status, _ = self.api.request("GET", "/readyz")
            if status != 200:
                return False
            status, crds = self.api.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            if status != 200:
                return False
            for crd in crds["items"]:
                spec = crd["spec"]
                for version in (v["name"] for v in spec["versions"] if v.get("served")):
                    path = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}?limit=1"
                    if self.api.request("GET", path)[0] != 200:
                        return False
        except (OSError, http.client.HTTPException):  # not listening yet, or closing a connection
            return False
        return True

    def down(self) -> None:
        """Delete the box (its processes and state); nothing when there is none."""
        kwokctl = (self.binaries or {}).get("kwokctl")
        if kwokctl and (self.home / "kwok" / "clusters" / self.name).exists():
            subprocess.run(
                [str(kwokctl), "--name", self.name, "delete", "cluster", "--kubeconfig", str(self.kubeconfig)],
                env=self._env(),
                capture_output=True,
                text=True,
                timeout=120,
            )
        if self.home.exists():
            shutil.rmtree(self.home, ignore_errors=True)
        self._api = None
        self.established_crds.clear()

    # --- kubectl ------------------------------------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: Optional[str] = None, check: bool = True, timeout_s: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self._binaries()["kubectl"]), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        if check and proc.returncode != 0:
            raise BoxError(f"kubectl {' '.join(args)} failed:\n{proc.stderr.strip()[-4000:]}")
        return proc

    def apply(
        self, docs: Iterable[Mapping[str, Any]], *, check: bool = True, dry_run: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Server-side apply ``docs`` (as ``pulumi up`` does with the Kubernetes provider's server-side apply mode);
        ``dry_run``: the server validates and admits them as an update, and stores nothing."""
        text = dump_yaml_documents(dict(d) for d in docs)
        return self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            f"--field-manager={FIELD_MANAGER}",
            *(["--dry-run=server"] if dry_run else []),
            "-f",
            "-",
            input=text,
            check=check,
        )

    def server_side_apply(
        self,
        docs: Iterable[Mapping[str, Any]],
        field_manager: str,
        *,
        force: bool = False,
        subresource: Optional[str] = None,
    ) -> None:
        """Server-side apply each of ``docs`` under ``field_manager`` over the REST API, as ``kubectl apply
        --server-side [--force-conflicts] [--subresource=...]`` does it, without a kubectl process: for what the box
        itself writes (nodes' devices, containers' logs, a provisioning answer), not the stack's objects, which
        :meth:`apply` gives kubectl."""
        query = f"?fieldManager={quote(field_manager)}&fieldValidation=Strict" + ("&force=true" if force else "")
        for doc in docs:
            sub = f"/{subresource}" if subresource else ""
            self.api.write(
                "PATCH",
                doc,
                named=True,
                query=sub + query,
                content_type="application/apply-patch+yaml",  # JSON is YAML
            )

    def create(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Create each of ``docs`` over the REST API (``kubectl create``), for what the box itself makes (nodes,
        volumes); :class:`BoxError` when one exists already or is refused."""
        for doc in docs:
            self.api.write("POST", doc, named=False, query=f"?fieldManager={FIELD_MANAGER}&fieldValidation=Strict")

    def annotate(self, resource: str, name: str, namespace: str, annotations: Mapping[str, Optional[str]]) -> None:
        """Set (or, with ``None``, remove) ``annotations`` of an object, as ``kubectl annotate --overwrite`` does (a
        merge patch)."""
        path = f"{self.api.collection_path(resource, namespace)}/{quote(name)}"
        patch = {"metadata": {"annotations": dict(annotations)}}
        self.api.send("PATCH", path, patch, "application/merge-patch+json", what=f"{resource} {name}")

    def get(self, *args: str) -> Any:
        """``kubectl get ARGS -o json``, read from the apiserver's REST API (:class:`Api`): an object, or a list with
        ``items`` (each with its ``apiVersion`` and ``kind``, as kubectl prints them). Raises :class:`BoxError` when the
        object or the resource type does not exist. Arguments kubectl takes that :class:`Api` does not read go to
        kubectl itself."""
        try:
            return self.api.get(*args)
        except NotRead:
            return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def exists(self, *args: str) -> bool:
        """Whether ``kubectl get ARGS`` would find the object (a resource type the server lacks: no)."""
        try:
            self.api.get(*args)
            return True
        except BoxError:
            return False

    @property
    def api(self) -> "Api":
        """The apiserver's REST API with the box's credentials (one per kubeconfig; made on first use)."""
        if self._api is None or self._api.kubeconfig != self.kubeconfig or self._api.stamp != self._stamp():
            self._api = Api(self.kubeconfig)
            self._api.stamp = self._stamp()
        return self._api

    def _stamp(self) -> float:
        return self.kubeconfig.stat().st_mtime if self.kubeconfig.exists() else 0.0

    def wait_for(self, predicate, *, timeout_s: float, interval_s: float = 0.2, what: str = "condition") -> Any:
        """Poll ``predicate()`` until it returns a true value (returned), or raise :class:`BoxError` naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise BoxError(f"timed out after {timeout_s:.0f} s waiting for {what}")
            time.sleep(interval_s)

    def __enter__(self) -> "Box":
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


def crd_established(box: Box, name: str) -> bool:
    """Whether the CRD ``name`` exists and is Established (its resource is served). Read once it is: a CRD stays
    Established until deleted, and each read returns its whole schema (Kueue's Workload: 700 KB)."""
    if name in box.established_crds:
        return True
    try:
        conditions = (box.get("crd", name).get("status") or {}).get("conditions") or []
    except BoxError:
        return False
    if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
        box.established_crds.add(name)
        return True
    return False


def establish_crds(box: Box, names: Sequence[str], timeout_s: float = 60.0) -> None:
    """Wait until each CRD is Established (an operator started before exits at once)."""
    for name in names:
        box.wait_for(lambda: crd_established(box, name), timeout_s=timeout_s, what=f"CRD {name} to be Established")
