"""``python -m stacks.rehearse`` offline: a bad stack file exits 2 with the message ``python -m stacks.plan`` prints,
before any box is built or brought up; the stack's commands are rewritten to run against the box. The rehearsal
itself runs in the cluster tier (``tests/test_cluster.py``: ``test_the_rehearse_command_prints_the_run``)."""

import shlex
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest

from stacks import rehearse
from stacks.box import build as box_build
from stacks.box import cluster
from stacks.outputs import workload_conditions_command
from tests.test_plan_cli import BAD, _stack_file

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("config,message", [pytest.param(c, m, id=i) for i, c, m in BAD[:2]])
def test_a_bad_stack_file_exits_2_before_any_box(tmp_path: Path, monkeypatch, config, message) -> None:
    def no_box(*args, **kwargs):
        raise AssertionError("a box was built or brought up for a bad stack file")

    monkeypatch.setattr(box_build, "build", no_box)
    monkeypatch.setattr(cluster.Box, "up", no_box)
    path = _stack_file(tmp_path / "project", {f"eks-training:{k}": v for k, v in config.items()})
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = rehearse.main(["--stack", "mine", "--stack-file", str(path), "--workdir", str(tmp_path / "boxes")])
    assert code == 2, (out.getvalue(), err.getvalue())
    assert "invalid stack configuration (1 problem(s)); no resource was created" in err.getvalue()
    assert message in err.getvalue()
    assert out.getvalue() == ""
    assert not (tmp_path / "boxes").exists()


def test_an_unreadable_stack_file_exits_2(tmp_path: Path) -> None:
    err = StringIO()
    with redirect_stderr(err):
        code = rehearse.main(["--stack", "nothing", "--stack-file", str(tmp_path / "Pulumi.nothing.yaml"),
                              "--workdir", str(tmp_path / "boxes")])
    assert code == 2 and "error: cannot read" in err.getvalue()


def test_the_stacks_commands_run_the_boxs_kubectl(tmp_path: Path) -> None:
    """Every kubectl of a waitCommand (two: Kueue's Workload, then the wait) and of a logsCommand runs the box's
    kubectl with its kubeconfig; nothing else in the line changes (the jsonpath's quoting included: the shell
    splits the rewritten line into the same words, the first two replaced)."""
    kubectl, kubeconfig = Path("/cache/box dir/kubectl"), tmp_path / "kubeconfig"
    wait = (workload_conditions_command("training", "train") + "; kubectl wait -n training --for=condition=complete "
            "--timeout=24h job/train")
    logs = "kubectl logs -n training -f --prefix --max-log-requests 64 -l eks-training/job=train"
    own = [str(kubectl), "--kubeconfig", str(kubeconfig)]
    for command in (wait, logs):
        rewritten = rehearse.box_command(command, kubectl, kubeconfig)
        words, before = shlex.split(rewritten.replace(";", " ; ")), shlex.split(command.replace(";", " ; "))
        starts = [i for i, w in enumerate(before) if w == "kubectl"]
        assert len(starts) == command.count("kubectl ")
        expected: list[str] = []
        for i, w in enumerate(before):
            expected += own if i in starts else [w]
        assert words == expected
        # and bash runs it: the box's kubectl is what it calls
        done = subprocess.run(["bash", "-c", rewritten.split(";")[0]], capture_output=True, text=True)
        assert "/cache/box dir/kubectl: No such file or directory" in done.stderr, done.stderr
