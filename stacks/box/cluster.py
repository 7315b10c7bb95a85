"""One box: a kwokctl cluster of the locally built binaries (``--runtime binary``), its kubeconfig, and kubectl.

kwokctl (https://kwok.sigs.k8s.io/docs/user/kwokctl-manage-cluster/) runs etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and the kwok controller as local processes; its state (logs, certificates,
pids) lives under ``KWOK_WORKDIR`` = the box's work folder, never in the user's ``~/.kwok`` or ``~/.kube/config``.
The kwok controller plays every node's kubelet with the Stages the project ships (``stages.yaml`` in this folder:
pods start, run for a duration and end with an exit code given by annotations) plus kwok's own node Stages, read
from the pinned kwok module (kwokctl replaces all of its default Stages once any is given).

kwokctl's ``stop``/``start`` left pods unprocessed when tried: a box is created fresh and deleted, never restarted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import yaml

from stacks.box import build as box_build

#: The project's pod Stages (see the module docstring).
POD_STAGES = Path(__file__).with_name("stages.yaml")
#: kwok's node Stages (relative to the kwok module): initialise a node as Ready, keep its lease renewed.
KWOK_NODE_STAGES = ("kustomize/stage/node/fast/node-initialize.yaml",
                    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")
#: The field manager of everything the box applies.
FIELD_MANAGER = "eks-training-box"


class BoxError(Exception):
    """The box could not be brought up, or a kubectl call failed (the message says which and why)."""


def default_workdir() -> Path:
    return box_build.cache_root().parent / "clusters"


def kwok_module_dir(go: str = "go") -> Path:
    """Where the Go module cache holds the pinned kwok module (downloaded by the build)."""
    proc = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], cwd=box_build.MODULES["kwok"].path,
                          capture_output=True, text=True, env=dict(os.environ, GOFLAGS="-mod=readonly"))
    if proc.returncode != 0 or not proc.stdout.strip():
        raise BoxError(f"cannot locate the kwok module: {proc.stderr.strip()}")
    return Path(proc.stdout.strip())


def stages_config(go: str = "go") -> str:
    """The kwokctl configuration: kwok's node Stages and the project's pod Stages, as one YAML stream."""
    module = kwok_module_dir(go)
    docs = [(module / rel).read_text() for rel in KWOK_NODE_STAGES] + [POD_STAGES.read_text()]
    return "\n---\n".join(d.strip() for d in docs) + "\n"


@dataclass
class Box:
    """A box named ``name`` whose state lives in ``workdir/<name>``."""

    name: str = "eks-training"
    workdir: Path = field(default_factory=default_workdir)
    #: Binaries by command name (:func:`stacks.box.build.build`); built or reused on :meth:`up` when empty.
    binaries: dict[str, Path] = field(default_factory=dict)
    #: ``"kubernetes"`` (the default minor, the whole control plane) or ``"kubernetes-oldest"`` (the oldest minor's
    #: kube-apiserver only, no scheduler nor controller manager: objects are validated, nothing runs).
    control_plane: str = "kubernetes"

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

    def up(self, timeout_s: float = 120.0) -> Path:
        """Create the box afresh (a left-over box of the same name is deleted first); returns the kubeconfig path."""
        bins = self._binaries()
        self.down()
        self.home.mkdir(parents=True, exist_ok=True)
        config = self.home / "kwokctl.yaml"
        config.write_text(stages_config())
        apiserver = bins["kube-apiserver-oldest" if self.control_plane == "kubernetes-oldest" else "kube-apiserver"]
        argv = [
            str(bins["kwokctl"]), "--name", self.name, "create", "cluster", "--runtime", "binary",
            "--config", str(config), "--kubeconfig", str(self.kubeconfig),
            "--etcd-binary", str(bins["etcd"]), "--kube-apiserver-binary", str(apiserver),
            "--kube-controller-manager-binary", str(bins["kube-controller-manager"]),
            "--kube-scheduler-binary", str(bins["kube-scheduler"]), "--kwok-controller-binary", str(bins["kwok"]),
            "--disable-qps-limits", "--wait", f"{int(timeout_s)}s",
        ]
        if self.control_plane == "kubernetes-oldest":
            argv += ["--disable-kube-scheduler", "--disable-kube-controller-manager"]
        proc = subprocess.run(argv, env=self._env(), capture_output=True, text=True, timeout=timeout_s + 60)
        if proc.returncode != 0:
            raise BoxError(f"kwokctl create cluster failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        return self.kubeconfig

    def down(self) -> None:
        """Delete the box (its processes and state); nothing when there is none."""
        kwokctl = (self.binaries or {}).get("kwokctl")
        if kwokctl and (self.home / "kwok" / "clusters" / self.name).exists():
            subprocess.run([str(kwokctl), "--name", self.name, "delete", "cluster", "--kubeconfig", str(self.kubeconfig)],
                           env=self._env(), capture_output=True, text=True, timeout=120)
        if self.home.exists():
            shutil.rmtree(self.home, ignore_errors=True)

    # --- kubectl ------------------------------------------------------------------------------------------------

    def kubectl(self, *args: str, input: Optional[str] = None, check: bool = True,
                timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(self._binaries()["kubectl"]), "--kubeconfig", str(self.kubeconfig), *args],
                              input=input, capture_output=True, text=True, timeout=timeout_s)
        if check and proc.returncode != 0:
            raise BoxError(f"kubectl {' '.join(args)} failed:\n{proc.stderr.strip()[-4000:]}")
        return proc

    def apply(self, docs: Iterable[Mapping[str, Any]], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Server-side apply ``docs`` (as ``pulumi up`` does with the Kubernetes provider's server-side apply mode)."""
        text = yaml.safe_dump_all([dict(d) for d in docs], sort_keys=False)
        return self.kubectl("apply", "--server-side", "--force-conflicts", f"--field-manager={FIELD_MANAGER}",
                            "-f", "-", input=text, check=check)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

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


def establish_crds(box: Box, names: Sequence[str], timeout_s: float = 60.0) -> None:
    """Wait until each CRD is Established (an operator started before exits at once)."""
    def established(name: str) -> bool:
        conditions = (box.get("crd", name).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    for name in names:
        box.wait_for(lambda: established(name), timeout_s=timeout_s, what=f"CRD {name} to be Established")
