"""The library works installed (issue 19, finding 2): the package is built and installed into a fresh virtualenv
outside the repository (``--no-deps``: its dependencies come from the tests' environment through a ``.pth`` file, so
nothing is downloaded again), then, from a Pulumi project named ``research`` in another folder, with that virtualenv's
Python:

- the README's library example (``Using the components from another project``) registers its components under the
  tests' Pulumi mocks, with ``components`` and ``stacks`` imported from the install;
- ``python -m stacks.plan --stack dev`` reads the project's own ``Pulumi.dev.yaml`` (not site-packages'), as does the
  console script ``eks-training plan --stack dev``, and
- ``python -m stacks.local --stack dev`` runs its jobs: the user's own PyTorch script through the launcher and the
  toolbox image's files the package ships (``stacks/_shipped/``), then a command job after it.

Before the fix the image folders were looked up under site-packages and not shipped, the plan looked for
``site-packages/Pulumi.dev.yaml``, and matplotlib, which the benchmark's summary imports, was not a dependency."""

import json
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness import REPO

pytestmark = pytest.mark.real

#: What the package is built from: the folders and files pyproject.toml and setup.py name.
SOURCES = ("components", "stacks", "training", "images", "pyproject.toml", "setup.py", "README.md")


class Installed:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.python = root / "venv" / "bin" / "python"
        self.project = root / "research"

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {"PATH": f"{self.python.parent}:/usr/bin:/bin", "HOME": str(self.root), "PYTHONUNBUFFERED": "1"}
        return subprocess.run([str(self.python), *args], cwd=self.project, env=env, capture_output=True, text=True,
                              timeout=timeout)


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
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(root / "wheels"), str(src)], check=True, timeout=300, capture_output=True)
    (wheel,) = (root / "wheels").glob("eks_training-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
    out = Installed(root)
    venv_site = Path(subprocess.run([str(out.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    check=True, capture_output=True, text=True).stdout.strip())
    # the dependencies: this environment's site-packages, after the virtualenv's own (the package is only there)
    (venv_site / "zz-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(out.python), "install", "-q", "--no-deps", str(wheel)],
                   check=True, timeout=300, capture_output=True)
    # a Pulumi project of another name, in a folder of its own, with the user's code
    out.project.mkdir()
    (out.project / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "research", "runtime": "python"}))
    (out.project / "src").mkdir()
    shutil.copy(REPO / "tests" / "programs" / "fit_line.py", out.project / "src" / "fit_line.py")
    (out.project / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {
        "aws:region": "us-west-2",
        "eks-training:nodeGroups": {"cpu": {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2}},
        "eks-training:jobs": {
            "fit": {"kind": "pytorch", "nodeGroup": "cpu", "nodes": 2, "minNodes": 2, "code": "s3://research-code/fit/",
                    "script": "fit_line.py", "rendezvousBackend": "c10d"},
            "report": {"kind": "command", "nodeGroup": "cpu", "after": ["fit"],
                       "command": ["python", "-c", "import json, os; "
                                   "print('fitted', json.load(open(os.environ['FIT_OUTPUT_DIR'] + '/line.json')))"]},
        },
    }}))
    return out


def test_the_package_imports_from_the_install_with_its_shipped_folders(installed: Installed) -> None:
    done = installed.run("-c", "import components, stacks, stacks.bundle as b, importlib.metadata as m, json; print(json.dumps("
                               "[components.__file__, stacks.__file__, str(b.shipped_root()), m.requires('eks-training')]))")
    assert done.returncode == 0, done.stderr
    comp, stk, shipped, requires = json.loads(done.stdout)
    venv = str(installed.root / "venv")
    assert comp.startswith(venv) and stk.startswith(venv) and shipped.startswith(venv), (comp, stk, shipped)
    assert shipped.endswith("stacks/_shipped") and any(r.startswith("matplotlib") for r in requires), requires


def test_the_readme_library_example_runs_installed(installed: Installed) -> None:
    driver = f"""
import re, sys
import components, stacks
sys.path.append({str(REPO)!r})  # the tests' mocks only; components and stacks stay the installed ones
from tests.harness import run_program
from pathlib import Path
readme = Path({str(REPO / 'README.md')!r}).read_text()
section = readme.split("## Using the components from another project", 1)[1]
main = Path("example.py")
main.write_text(re.search(r"```python\\n(.*?)```", section, re.S).group(1))
p = run_program("dev", config={{"aws:region": "us-west-2"}}, main=main.resolve())
assert sys.modules["components"].__file__ == components.__file__
print(sorted({{r.type for r in p.registrations if r.type.startswith("eks-training:")}}))
print(components.__file__)
"""
    done = installed.run("-c", driver)
    assert done.returncode == 0, done.stderr[-3000:]
    types, where = done.stdout.strip().splitlines()[-2:]
    for t in ("TrainingVpc", "TrainingCluster", "TrainingNodeGroup", "DevicePlugin"):
        assert f"eks-training:index:{t}" in types
    assert where.startswith(str(installed.root / "venv"))


def test_the_plan_reads_the_projects_stack_file(installed: Installed) -> None:
    done = installed.run("-m", "stacks.plan", "--stack", "dev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("plan of stack dev (project research, region us-west-2)")
    assert "1. fit (pytorch) on cpu" in done.stdout and "2. report (command) on cpu" in done.stdout
    # the console script pip installs from [project.scripts] runs the same command
    script = installed.python.parent / "eks-training"
    env = {"PATH": f"{installed.python.parent}:/usr/bin:/bin", "HOME": str(installed.root)}
    by_script = subprocess.run([str(script), "plan", "--stack", "dev"], cwd=installed.project, env=env,
                               capture_output=True, text=True, timeout=300)
    assert (by_script.returncode, by_script.stdout) == (0, done.stdout), by_script.stderr
    listing = subprocess.run([str(script), "--help"], cwd=installed.project, env=env, capture_output=True, text=True,
                             timeout=300)
    assert listing.returncode == 0 and listing.stdout.startswith("usage: eks-training [-h] COMMAND"), listing.stderr
    unknown = installed.run("-m", "stacks.plan", "--stack", "prod")
    assert unknown.returncode == 2 and f"{installed.project}: dev" in unknown.stderr, unknown.stderr


def test_the_local_runner_runs_the_projects_jobs_installed(installed: Installed) -> None:
    done = installed.run("-m", "stacks.local", "--stack", "dev", "--code", "fit=src")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = installed.project / ".local" / "dev"
    (fit,) = (work / "shared" / "runs").glob("fit-*")
    assert json.loads((fit / "DONE").read_text())["by"] == "launch.py"
    assert "report/0: fitted {'w': 3.0" in done.stdout or "report/0: fitted {'w': 2.99" in done.stdout, done.stdout
    launcher = [line for line in (work / "logs" / "fit-0.log").read_text().splitlines() if '"event": "spawn"' in line]
    assert launcher and "torchrun" in launcher[0]
    assert "[local] job report: completed in " in done.stdout
