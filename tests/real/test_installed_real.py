"""The library works installed: the package is built (from the source tree, as ``pip install
../eks-training`` does, and from its sdist, a release: the same files) and installed into a fresh virtualenv
outside the repository (``--no-deps``: its dependencies come from the tests' environment through a ``.pth`` file, so
nothing is downloaded again), then, from a Pulumi project named ``research`` in another folder, which has packages of
its own named ``components`` and ``stacks`` (a common layout), with that virtualenv's Python:

- everything imports as ``eks_training.components`` / ``eks_training.stacks`` (setup.py), nothing installs the
  top-level names ``components`` or ``stacks``, and the wheel holds every file the installed tools read: the images'
  build folders, the box's Go modules, ``stacks/box/stages.yaml``, the configuration reference, the program;
- the components guide's example (``docs/how-to/components.md``, "From Python") registers its components under the
  package's Pulumi mocks (:mod:`stacks.mocked`), and so does the shipped program for the project's stack (what
  ``eks-training rehearse`` evaluates), while the project's own ``components`` and ``stacks`` stay the ones imported;
- ``python -m eks_training.stacks.plan --stack dev`` reads the project's own ``Pulumi.dev.yaml`` (not
  site-packages'), as does the console script ``eks-training plan --stack dev``;
- ``python -m eks_training.stacks.local --stack dev`` runs its jobs: the user's own PyTorch script through the
  launcher and the toolbox image's files the package ships, then a command job after it;
- ``eks-training box build`` builds the box from the shipped Go modules (the binaries' cache is the one
  ``.ci/run`` fills, so it reuses them: the same pins give the same cache folders), and ``eks-training rehearse
  --help`` runs.

Before the fix the image folders were looked up under site-packages and not shipped, the plan looked for
``site-packages/Pulumi.dev.yaml``, matplotlib, which the benchmark's summary imports, was not a dependency, and the
package installed the top-level packages ``components`` and ``stacks``: the user's own packages of those names and
the installed ones shadowed each other."""

import json
import os
import shutil
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from stacks.box import build as box_build
from stacks.cli import TOOLS
from tests.harness import REPO, guide_example
from tests.wait import patient

#: What the package is built from: the folders and files pyproject.toml and setup.py name.
SOURCES = (
    "components",
    "stacks",
    "training",
    "images",
    "box",
    "docs",
    "__main__.py",
    "pyproject.toml",
    "setup.py",
    "README.md",
)
#: The project's own packages, named like the library's.
OWN_PACKAGES = ("components", "stacks")


class Installed:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "venv" / "bin" / "python"
        self.project = root / "research"
        self.wheel = root / "wheel.whl"

    def env(self, **extra: str) -> dict[str, str]:
        # TMPDIR: the machine's, which the test run set to a folder of its own (tests/conftest.py temp_of_the_run)
        temp = {"TMPDIR": os.environ["TMPDIR"]} if "TMPDIR" in os.environ else {}
        return {
            "PATH": f"{self.python.parent}:/usr/bin:/bin",
            "HOME": str(self.root),
            "PYTHONUNBUFFERED": "1",
            **temp,
            **extra,
        }

    def run(
        self, *args: str, timeout: float | None = None, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.project,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=patient(300) if timeout is None else timeout,
            input=input,
        )

    def script(
        self, *args: str, timeout: float | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The console script pip installs from ``[project.scripts]``."""
        return subprocess.run(
            [str(self.python.parent / "eks-training"), *args],
            cwd=self.project,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=patient(300) if timeout is None else timeout,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    src = root / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy(REPO / name, src / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "wheels"),
            str(src),
        ],
        check=True,
        timeout=patient(300),
        capture_output=True,
    )
    (wheel,) = (root / "wheels").glob("eks_training-*.whl")
    # a release (an sdist, unpacked) builds the same package
    subprocess.run(
        [sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(root / 'sdist')!r})"],
        cwd=src,
        check=True,
        timeout=patient(300),
        capture_output=True,
    )
    (sdist,) = (root / "sdist").glob("eks_training-*.tar.gz")
    shutil.unpack_archive(sdist, root / "release")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "release-wheels"),
            str(next((root / "release").iterdir())),
        ],
        check=True,
        timeout=patient(300),
        capture_output=True,
    )
    (released,) = (root / "release-wheels").glob("eks_training-*.whl")
    assert sorted(zipfile.ZipFile(released).namelist()) == sorted(zipfile.ZipFile(wheel).namelist())
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=patient(120)
    )
    out = Installed(root)
    shutil.copy(wheel, out.wheel)
    venv_site = Path(
        subprocess.run(
            [str(out.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # the dependencies: this environment's site-packages, after the virtualenv's own (the package is only there)
    (venv_site / "zz-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(out.python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=patient(300),
        capture_output=True,
    )
    # a Pulumi project of another name, in a folder of its own, with the user's code and packages of its own named
    # like the library's
    out.project.mkdir()
    for own in OWN_PACKAGES:
        (out.project / own).mkdir()
        (out.project / own / "__init__.py").write_text(
            f'"""The research project\'s own {own}."""\nOWNER = "research"\n'
        )
    (out.project / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "research", "runtime": "python"}))
    (out.project / "src").mkdir()
    shutil.copy(REPO / "tests" / "programs" / "fit_line.py", out.project / "src" / "fit_line.py")
    (out.project / "Pulumi.dev.yaml").write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-west-2",
                    "eks-training:nodeGroups": {
                        "cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2}
                    },
                    "eks-training:jobs": {
                        "fit": {
                            "kind": "pytorch",
                            "nodeGroup": "cpu",
                            "nodes": 2,
                            "minNodes": 2,
                            "code": "s3://research-code/fit/",
                            "script": "fit_line.py",
                            "rendezvousBackend": "c10d",
                        },
                        "report": {
                            "kind": "command",
                            "nodeGroup": "cpu",
                            "after": ["fit"],
                            "command": [
                                "python",
                                "-c",
                                "import json, os; "
                                "print('fitted', json.load(open(os.environ['FIT_OUTPUT_DIR'] + '/line.json')))",
                            ],
                        },
                    },
                }
            }
        )
    )
    return out


def test_the_package_installs_under_its_own_name_with_what_its_tools_read(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"eks_training"}, tops  # no top-level components/, stacks/ to collide with a project's own
    # every file of the packages and of the shipped folders, at its place in the repository's layout
    wanted = {
        f"eks_training/{p.relative_to(REPO)}"
        for top in ("components", "stacks", "training", "images")
        for p in (REPO / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    wanted |= {
        f"eks_training/box/{m}/{p.name}"
        for m in box_build.MODULES
        for p in (REPO / "box" / m).iterdir()
        if p.name in ("go.mod", "go.sum") or p.suffix == ".go"
    }
    wanted |= {
        "eks_training/docs/reference/configuration.md",
        "eks_training/__main__.py",
        "eks_training/__init__.py",
        "eks_training/py.typed",  # PEP 561: a project's type checker reads the components' typed args
        "eks_training/stacks/box/stages.yaml",
    }
    assert wanted - names == set()
    entry = (
        zipfile.ZipFile(installed.wheel)
        .read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    assert "eks-training = eks_training.stacks.cli:script" in entry

    done = installed.run(
        "-c",
        """
import importlib.util, importlib.metadata as m, json, sys
sys.path.remove('')  # not the project's folder: what the install provides
import eks_training.components as c, eks_training.stacks as s, eks_training.stacks.bundle as b
import eks_training.stacks.box.build as bb, eks_training.stacks.box.cluster as bc, eks_training.stacks.cli as cli
print(json.dumps({"files": [c.__file__, s.__file__, str(b.ROOT), str(bb.MODULES_DIR), str(bc.POD_STAGES),
                            str(b.REFERENCE)],
                  "prefix": b.PREFIX, "top": [importlib.util.find_spec(n) is None for n in ("components", "stacks")],
                  "shipped": [(b.shipped(f) / "Dockerfile").is_file() for f in b.SHIPPED],
                  "box": all((bb.MODULES_DIR / f / "go.mod").is_file() for f in bb.MODULES),
                  "exists": [bc.POD_STAGES.is_file(), b.REFERENCE.is_file()],
                  "requires": m.requires("eks-training"),
                  "tools": {n: t.main().__module__ for n, t in cli.TOOLS.items()}}))
""",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    package = str(installed.root / "venv")
    assert all(f.startswith(package) and "/eks_training/" in f + "/" for f in out["files"]), out["files"]
    assert out["prefix"] == "eks_training." and out["top"] == [True, True], out
    assert all(out["shipped"]) and out["box"] and out["exists"] == [True, True], out
    assert any(r.startswith("matplotlib") for r in out["requires"]), out["requires"]
    # every command's module, imported by its name (stacks/cli.py TOOLS), is the installed one
    assert out["tools"] == {name: f"eks_training.{tool.module}" for name, tool in TOOLS.items()}


#: Run in the project's folder (on the path first, as under ``pulumi up``): a program is evaluated under the package's
#: mocks, then the names ``components`` and ``stacks`` must be the project's own packages (imported by the program, or
#: after it), and nothing else may hold them.
_BESIDE_THE_PROJECTS_OWN = """
import json, sys
from eks_training.stacks.mocked import evaluate
{evaluate}
import components, stacks
assert components.OWNER == stacks.OWNER == "research", (components.__file__, stacks.__file__)
clashing = sorted(m for m in sys.modules if m.split(".")[0] in ("components", "stacks"))
installed = sorted({{m.__file__.split("/eks_training/")[0] for n, m in sys.modules.items()
                     if n.startswith("eks_training.") and getattr(m, "__file__", None)}})
providers = [r.inputs["__provider"] for r in ev.registrations if "__provider" in r.inputs]
print(json.dumps({{"types": sorted({{r.type for r in ev.registrations}}), "clashing": clashing,
                  "installed": installed, "providers": providers}}))
"""


def _beside_the_projects_own(installed: Installed, evaluate: str) -> dict:
    done = installed.run("-c", _BESIDE_THE_PROJECTS_OWN.format(evaluate=evaluate))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["clashing"] == ["components", "stacks"], out["clashing"]
    assert len(out["installed"]) == 1 and out["installed"][0].startswith(str(installed.root / "venv")), out
    return out


def test_the_readme_library_example_runs_installed_beside_the_projects_own_packages(installed: Installed) -> None:
    example = guide_example()  # every block of "From Python", as written
    # the project's program uses its own packages too (imported while it runs: the mocks put nothing of the package
    # on the path before the project's folder)
    (installed.project / "example.py").write_text(
        "import components, stacks  # the project's own\n"
        + example
        + "assert components.OWNER == stacks.OWNER == 'research', components.__file__\n"
    )
    out = _beside_the_projects_own(
        installed,
        'ev = evaluate("dev", {"aws:region": "us-west-2"}, main=__import__('
        '"pathlib").Path("example.py").resolve(), project="research", '
        'project_dir=__import__("pathlib").Path.cwd())',
    )
    for t in ("TrainingVpc", "TrainingCluster", "TrainingNodeGroup", "DevicePlugin", "EfsStorage", "CommandJob"):
        assert f"eks-training:index:{t}" in out["types"]


def test_the_shipped_program_evaluates_the_projects_stack_beside_its_own_packages(installed: Installed) -> None:
    """What ``eks-training rehearse`` runs for a project without a ``__main__.py``: the shipped program."""
    out = _beside_the_projects_own(
        installed,
        "from eks_training.stacks.mocked import evaluate_stack\nconfig, plan, ev = evaluate_stack('dev', None)",
    )
    assert {
        "eks-training:index:TrainingCluster",
        "eks-training:index:PyTorchJob",
        "eks-training:index:CommandJob",
    } <= set(out["types"]), out["types"]
    # the image build's dynamic provider, as the engine receives it (dill, by reference to its module): Pulumi's
    # dynamic-provider host loads it in the project's folder, beside the project's own components/
    assert out["providers"], out["types"]
    host = installed.run(
        "-c",
        "import base64, sys, dill; p = dill.loads(base64.b64decode(sys.stdin.read())); "
        "print(type(p).__module__, type(p).__name__)",
        input=out["providers"][0],
    )
    assert host.returncode == 0, host.stderr[-2000:]
    assert host.stdout.split() == ["eks_training.components.image.build_provider", "ImageBuildProvider"]


def test_the_plan_reads_the_projects_stack_file(installed: Installed) -> None:
    done = installed.run("-m", "eks_training.stacks.plan", "--stack", "dev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("plan of stack dev (project research, region us-west-2)")
    assert "1. fit (pytorch) on cpu" in done.stdout and "2. report (command) on cpu" in done.stdout
    # the console script runs the same command
    by_script = installed.script("plan", "--stack", "dev")
    assert (by_script.returncode, by_script.stdout) == (0, done.stdout), by_script.stderr
    listing = installed.script("--help")
    assert listing.returncode == 0 and listing.stdout.startswith("usage: eks-training [-h] COMMAND"), listing.stderr
    unknown = installed.run("-m", "eks_training.stacks.plan", "--stack", "prod")
    assert unknown.returncode == 2 and f"{installed.project}: dev" in unknown.stderr, unknown.stderr
    # a configuration error points to the reference the package ships
    (installed.project / "Pulumi.typo.yaml").write_text(
        yaml.safe_dump(
            {
                "config": {
                    "aws:region": "us-west-2",
                    "eks-training:nodeGroups": {
                        "cpu": {
                            "instanceTypes": ["m5.xlarge"],
                            "minSize": 0,
                            "desiredSize": 1,
                            "maxSize": 2,
                            "lables": {},
                        }
                    },
                }
            }
        )
    )
    typo = installed.script("plan", "--stack", "typo")
    reference = installed.run("-c", "import eks_training.stacks.bundle as b; print(b.REFERENCE)").stdout.strip()
    assert typo.returncode == 2 and f"(the valid keys: {reference})" in typo.stderr, typo.stderr
    assert reference.startswith(str(installed.root / "venv")) and Path(reference).is_file()
    printed = installed.script("docs", "--reference")
    assert printed.returncode == 0 and printed.stdout == Path(reference).read_text(), printed.stderr
    assert "python -m eks_training.stacks preflight --stack NAME" in printed.stdout
    refused = installed.script("docs")
    assert refused.returncode == 2 and f"configuration reference is {reference}" in refused.stderr, refused.stderr


def test_the_local_runner_runs_the_projects_jobs_installed(installed: Installed) -> None:
    done = installed.run("-m", "eks_training.stacks.local", "--stack", "dev", "--code", "fit=src")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = installed.project / ".local" / "dev"
    (fit,) = (work / "shared" / "runs").glob("fit-*")
    assert json.loads((fit / "DONE").read_text())["by"] == "launch.py"
    assert "report/0: fitted {'w': 3.0" in done.stdout or "report/0: fitted {'w': 2.99" in done.stdout, done.stdout
    launcher = [line for line in (work / "logs" / "fit-0.log").read_text().splitlines() if '"event": "spawn"' in line]
    assert launcher and "torchrun" in launcher[0]
    assert "[local] job report: completed in " in done.stdout


def test_the_box_builds_from_the_shipped_go_modules(installed: Installed) -> None:
    """``eks-training box build`` resolves the Go modules the package ships: the same pins as the repository's, so
    the same cache folders, which .ci/run's build (and the cluster tier) fill: the binaries are reused."""
    go = shutil.which(os.environ.get("GO", "go"))
    assert go, "the box needs Go; .ci/run installs it"
    env = installed.env(
        HOME=os.environ["HOME"],
        PATH=f"{installed.python.parent}:{Path(go).parent}:/usr/bin:/bin",
        **{k: v for k, v in os.environ.items() if k.startswith("GO") or k == "EKS_TRAINING_BOX_CACHE"},
    )
    start = time.monotonic()
    done = installed.script("box", "build", env=env, timeout=patient(1800))
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-3000:]
    printed = dict(line.split("\t") for line in done.stdout.strip().splitlines())
    # the repository's build: the paths are the cache folders of the same pins (built already: reused here)
    expected = {name: str(path) for name, path in box_build.build(go=go).items()}
    assert printed == expected
    # the modules resolve in the shipped folder itself (go list reads its go.mod and go.sum)
    shipped = installed.run(
        "-c", "import eks_training.stacks.box.build as b; print(b.MODULES['kwok'].path)", env=env
    ).stdout.strip()
    assert shipped.startswith(str(installed.root / "venv")), shipped
    listed = subprocess.run(
        [go, "list", "-m", "sigs.k8s.io/kwok"],
        cwd=shipped,
        env=env,
        capture_output=True,
        text=True,
        timeout=patient(300),
    )
    assert listed.returncode == 0 and listed.stdout.split() == [
        "sigs.k8s.io/kwok",
        box_build.MODULES["kwok"].version(),
    ], listed.stderr
    print(f"eks-training box build from the install: {took:.1f} s")
    rehearse = installed.script("rehearse", "--help", env=env)
    assert rehearse.returncode == 0 and rehearse.stdout.startswith("usage: eks-training rehearse"), rehearse.stderr


def test_an_editable_install_is_refused_with_the_reason(installed: Installed) -> None:
    """``pip install -e`` would map ``eks_training`` onto the repository, whose modules import ``components``: refused
    when the editable wheel is built, saying what to do instead."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from setuptools import build_meta; build_meta.build_editable({str(installed.root / 'editable')!r})",
        ],
        cwd=installed.root / "src",
        capture_output=True,
        text=True,
        timeout=patient(300),
    )
    assert done.returncode != 0 and "cannot be installed in editable mode (pip install -e)" in done.stderr, done.stderr[
        -2000:
    ]
    assert not list((installed.root / "editable").glob("*.whl"))


def test_the_guides_offline_test_runs_on_the_guides_example_installed(installed: Installed) -> None:
    """A project's own unit test of its program, as the components guide writes it ("Test your program offline"):
    the guide's example saved as ``infra.py``, under the installed library's ``TrainingMocks``, passes; the same test
    with a wrong expectation fails (so it checks something)."""
    guide = (REPO / "docs" / "how-to" / "components.md").read_text()
    snippet = guide.split("<!-- example: mocks test -->\n```python\n", 1)[1].split("```", 1)[0]
    folder = installed.project / "offline"
    folder.mkdir()
    (folder / "infra.py").write_text(guide_example())
    (folder / "test_infra.py").write_text(snippet)
    (folder / "test_wrong.py").write_text(snippet.replace("gpus == 1", "gpus == 2"))
    done = installed.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "offline/test_infra.py")
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    wrong = installed.run("-m", "pytest", "-q", "-p", "no:cacheprovider", "offline/test_wrong.py")
    assert wrong.returncode == 1 and "1 failed" in wrong.stdout, wrong.stdout[-3000:] + wrong.stderr[-3000:]
