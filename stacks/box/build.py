"""Build (or reuse) the box's pinned binaries: ``python -m stacks.box build``.

Every binary comes from a Go module in the repository's ``box/`` folder (:data:`MODULES`): ``kubernetes``,
``kubernetes-oldest``, ``kubernetes-previous``, ``etcd``, ``kwok``, ``mpi-operator``, ``kueue``, ``kueue-previous``,
``await`` and ``helm``. Each is built with the Go toolchain and the Go module proxy into a cache folder outside the
work tree (:func:`cache_root`: ``$EKS_TRAINING_BOX_CACHE`` or ``~/.cache/eks-training/box/``). A sub-folder per module
is named by its version and a digest of its pins, code, flags and Go version, so a changed pin builds anew and an
unchanged one is reused. No binary is ever written to the repository.

Why each module, with the sources: docs/explanation/box.md, "Pinned builds"."""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from components.catalog.platform import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from stacks.bundle import BOX

#: The folder of Go modules (one per piece; see the module docstring): the repository's ``box/``, or the copy an
#: installed package ships (:data:`stacks.bundle.BOX`).
MODULES_DIR = BOX


class BoxBuildError(Exception):
    """A binary could not be built (no Go toolchain, the module proxy unreachable, a compile error)."""


@dataclass(frozen=True)
class Module:
    """One Go module of ``box/`` and the commands built from it."""

    folder: str
    #: The module path whose pinned version names the cache folder and, for Kubernetes, stamps the binaries.
    pinned: str
    #: command name -> Go package path.
    commands: Mapping[str, str]
    kubernetes: bool = False

    @property
    def path(self) -> Path:
        return MODULES_DIR / self.folder

    def version(self) -> str:
        """The version ``go.mod`` pins for :attr:`pinned` (read from the file, the one place it is written)."""
        text = (self.path / "go.mod").read_text()
        m = re.search(rf"^\s*(?:require\s+)?{re.escape(self.pinned)}\s+(v\S+)", text, re.MULTILINE)
        if not m:
            raise BoxBuildError(f"{self.path / 'go.mod'} does not require {self.pinned}")
        return m.group(1)

    def ldflags(self) -> str:
        if not self.kubernetes:
            return "-s -w"
        version = self.version()
        major, minor = version.lstrip("v").split(".")[:2]
        pkg = "k8s.io/component-base/version"
        return (
            f"-s -w -X {pkg}.gitVersion={version} -X {pkg}.gitMajor={major} -X {pkg}.gitMinor={minor} "
            f"-X {pkg}.gitTreeState=clean"
        )

    def cache_dir(self, root: Path, go_version: str) -> Path:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.path / name).read_bytes())
        for code in sorted(self.path.glob("*.go")):  # a command of the repository's own (tools.go only pins)
            if code.name != "tools.go":
                digest.update(code.read_bytes())
        digest.update(self.ldflags().encode())
        digest.update("\n".join(f"{k}={v}" for k, v in sorted(self.commands.items())).encode())
        digest.update(go_version.encode())
        return root / f"{self.folder}-{self.version()}-{digest.hexdigest()[:12]}"


#: Seconds each command's build takes on 2 idle cores with Go's build and module caches empty (the first
#: ``python -m stacks.box build`` on a fresh machine, at the pins of ``box/``): a cold run says how long it will take
#: before it starts (:func:`build`). Measured by ``.ci/run`` on a fresh machine on 2026-12-03, the slowest of the
#: cold builds measured for this project: 2,410 s in all, each command's module downloads included
#: (docs/explanation/verified.md, "Building the box"). A later pin that builds much longer updates them.
COLD_BUILD_S: Mapping[str, Mapping[str, int]] = {
    "kubernetes": {"kube-apiserver": 373, "kube-controller-manager": 95, "kube-scheduler": 10, "kubectl": 34},
    "kubernetes-oldest": {"kube-apiserver": 321},
    "kubernetes-previous": {"kube-apiserver": 301, "kube-controller-manager": 87, "kube-scheduler": 7},
    "etcd": {"etcd": 44},
    "kwok": {"kwok": 102, "kwokctl": 17},
    "mpi-operator": {"mpi-operator": 179},
    "kueue": {"kueue": 318},
    "kueue-previous": {"kueue": 269},
    "helm": {"helm": 105},
    "await": {"pulumi-await": 145},
}

_K8S = "k8s.io/kubernetes/cmd/"
MODULES: Mapping[str, Module] = {
    m.folder: m
    for m in (
        Module(
            "kubernetes",
            "k8s.io/kubernetes",
            {c: _K8S + c for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")},
            kubernetes=True,
        ),
        Module("kubernetes-oldest", "k8s.io/kubernetes", {"kube-apiserver": _K8S + "kube-apiserver"}, kubernetes=True),
        Module(
            "kubernetes-previous",
            "k8s.io/kubernetes",
            {c: _K8S + c for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")},
            kubernetes=True,
        ),
        Module("etcd", "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"}),
        Module(
            "kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok", "kwokctl": "sigs.k8s.io/kwok/cmd/kwokctl"}
        ),
        Module(
            "mpi-operator",
            "github.com/kubeflow/mpi-operator",
            {"mpi-operator": "github.com/eks-training/box/mpi-operator"},
        ),
        Module("kueue", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"}),
        Module("kueue-previous", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"}),
        Module("helm", "helm.sh/helm/v3", {"helm": "helm.sh/helm/v3/cmd/helm"}),
        Module(
            "await",
            "github.com/pulumi/pulumi-kubernetes/provider/v4",
            {"pulumi-await": "github.com/eks-training/box/await"},
        ),
    )
}


def cache_root() -> Path:
    override = os.environ.get("EKS_TRAINING_BOX_CACHE")
    return Path(override) if override else Path.home() / ".cache" / "eks-training" / "box"


def go_version(go: str, cwd: Optional[Path] = None) -> str:
    """The Go toolchain that builds in ``cwd`` (a module asking for a newer Go than the installed one gets it from
    the module proxy: GOTOOLCHAIN=auto)."""
    try:
        out = subprocess.run(
            [go, "env", "GOVERSION"], check=True, capture_output=True, text=True, cwd=cwd
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BoxBuildError(
            f"the box is built with the Go toolchain ('{go}'), which did not run: {exc}. Install Go "
            "1.26 or newer (https://go.dev/dl/) or set GO to its path"
        ) from exc
    return out


def module_minor(module: Module) -> str:
    """``"1.36"`` for a Kubernetes module pinned at v1.36.3."""
    return ".".join(module.version().lstrip("v").split(".")[:2])


#: What each Kubernetes module's minor is to the config (components/catalog/platform.py).
PINNED_MINORS = {
    "kubernetes": ("default", DEFAULT_KUBERNETES_VERSION),
    "kubernetes-oldest": ("oldest", SUPPORTED_KUBERNETES_VERSIONS[0]),
    "kubernetes-previous": (
        "previous (the one before the default)",
        SUPPORTED_KUBERNETES_VERSIONS[SUPPORTED_KUBERNETES_VERSIONS.index(DEFAULT_KUBERNETES_VERSION) - 1],
    ),
}
#: A module pinned at the release before another module's (the box upgrades from it): previous -> current.
PREVIOUS_RELEASES = {"kueue-previous": "kueue"}
#: The name suffix of a module's commands in :func:`build`'s answer (the default minor's have none).
SUFFIXES = {"kubernetes-oldest": "-oldest", "kubernetes-previous": "-previous", "kueue-previous": "-previous"}


def check_pins() -> None:
    """The Kubernetes modules are pinned at the minors the config defaults to, accepts at the oldest, and upgrades
    to the default from; a previous release (:data:`PREVIOUS_RELEASES`) is older than the current one."""
    for folder, (role, minor) in PINNED_MINORS.items():
        got = module_minor(MODULES[folder])
        if got != minor:
            raise BoxBuildError(
                f"box/{folder}/go.mod pins k8s.io/kubernetes at {got}, but the config's {role} minor is {minor} "
                "(components/catalog/platform.py): pin the module at that minor"
            )
    for folder, of in PREVIOUS_RELEASES.items():
        previous, current = MODULES[folder].version(), MODULES[of].version()
        if _release(previous) >= _release(current):
            raise BoxBuildError(
                f"box/{folder}/go.mod pins {MODULES[folder].pinned} {previous}, not older than box/{of}'s {current}: "
                "pin the release the stacks pinned before the current one"
            )


def _release(version: str) -> tuple[int, ...]:
    """``(0, 19, 1)`` for ``v0.19.1``."""
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("."))


def cached(module: Module, *, go: str = "go", root: Optional[Path] = None) -> bool:
    """The module's commands are in its cache folder already (nothing to build)."""
    target = module.cache_dir(root or cache_root(), go_version(go, module.path))
    return all((target / name).is_file() and os.access(target / name, os.X_OK) for name in module.commands)


def cold_estimate(modules: Sequence[Module], root: Path) -> str:
    """What a build of ``modules`` from nothing will take, said before it starts (:data:`COLD_BUILD_S`)."""
    parts = [
        (
            name
            + (f" ({PINNED_MINORS[m.folder][0]} minor)" if m.folder in PINNED_MINORS else "")
            + (" (the previous release)" if m.folder in PREVIOUS_RELEASES else ""),
            COLD_BUILD_S[m.folder][name],
        )
        for m in modules
        for name in m.commands
    ]
    total = sum(s for _, s in parts)
    each = ", ".join(f"{name} ~{s} s" for name, s in parts)
    return (
        f"building the box's binaries ({', '.join(m.folder for m in modules)}) into {root}, once: about "
        f"{math.ceil(total / 60)} min on 2 idle cores with Go's caches empty ({each}); less with Go's build cache "
        "warm, more or faster cores, more on a busy machine. Later runs reuse them."
    )


def build_module(module: Module, *, go: str = "go", root: Optional[Path] = None, log=None) -> dict[str, Path]:
    """The module's commands built into (or found in) its cache folder: command name -> binary path."""
    root = root or cache_root()
    target = module.cache_dir(root, go_version(go, module.path))
    binaries = {name: target / name for name in module.commands}
    if all(p.is_file() and os.access(p, os.X_OK) for p in binaries.values()):
        return binaries
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{module.folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same module; wait for it
        if all(p.is_file() for p in binaries.values()):
            return binaries
        staging = Path(tempfile.mkdtemp(prefix=f".{module.folder}-", dir=root))
        env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly " + os.environ.get("GOFLAGS", ""))
        try:
            for name, package in sorted(module.commands.items()):
                start = time.monotonic()
                if log:
                    log(f"building {name} ({module.pinned} {module.version()}) ...")
                proc = subprocess.run(
                    [go, "build", "-trimpath", "-ldflags", module.ldflags(), "-o", str(staging / name), package],
                    cwd=module.path,
                    env=env,
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    raise BoxBuildError(f"go build {package} in {module.path} failed:\n{proc.stderr[-4000:]}")
                if log:
                    log(f"built {name} in {time.monotonic() - start:.0f} s")
            if target.exists():
                shutil.rmtree(target)
            staging.rename(target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return binaries


def build(folders: Sequence[str] = tuple(MODULES), *, go: Optional[str] = None, log=None) -> dict[str, Path]:
    """Every command of the given modules, built or reused: command name -> path (``kube-apiserver`` is the default
    minor's; the oldest minor's is ``kube-apiserver-oldest``, the previous minor's ``kube-apiserver-previous``)."""
    check_pins()
    go = go or os.environ.get("GO", "go")
    if log:
        missing = [MODULES[f] for f in folders if not cached(MODULES[f], go=go)]
        if missing:
            log(cold_estimate(missing, cache_root()))
    out: dict[str, Path] = {}
    for folder in folders:
        for name, path in build_module(MODULES[folder], go=go, log=log).items():
            out[name + SUFFIXES.get(folder, "")] = path
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    folders = args or list(MODULES)
    unknown = [f for f in folders if f not in MODULES]
    if unknown:
        print(f"unknown module(s) {unknown}; the box's modules are {sorted(MODULES)}", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        paths = build(folders, log=lambda m: print(m, file=sys.stderr, flush=True))
    except BoxBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, path in sorted(paths.items()):
        print(f"{name}\t{path}")
    print(f"box binaries ready in {time.monotonic() - start:.0f} s (cache: {cache_root()})", file=sys.stderr)
    return 0
