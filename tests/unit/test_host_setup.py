"""Host-side facts over every stack: a node whose pods use a storage feature has, on its host, what the feature
needs (``components/catalog/fsx.py``: ``HOST_REQUIREMENTS``, each with its public source), installed by its launch
template's user data.

The rule is read from what each stack registers, not from the plan that derives it: every pod template (Jobs,
Deployments, MPIJobs...) that mounts a claim bound to an FSx for Lustre PersistentVolume lands, by its node selector,
on some node groups; each of those groups' launch templates must carry a MIME user data whose shell part installs the
packages of :data:`FSX_CLIENT_HOST` (the EKS AL2023 AMIs lack the Lustre user-space tools, source key
``eks-ami-al2023-lustre``), and no group installs what its pods do not use. What runs the user data on a real node is
cloud-init (it splits the MIME document with Python's ``email`` parser and runs each ``text/x-shellscript`` part,
https://cloudinit.readthedocs.io/en/latest/explanation/format.html#mime-multi-part-archive) before ``nodeadm-run``
starts the kubelet; here the same parser splits it and a real bash runs the script against a stand-in ``dnf``.
"""

import base64
import email
import os
import stat
import subprocess
from pathlib import Path

import pytest

from components.catalog.fsx import FSX_CLIENT_HOST, HOST_REQUIREMENTS, NODE_BOOTSTRAP_PROVIDES
from components.catalog.sources import SOURCES
from components.nodeplan import INSTALL_ATTEMPTS, host_setup_script, host_setup_user_data
from tests.wait import patient

#: Node selector keys a managed node group's ``labels`` do not carry (Kubernetes sets them on every node).


def shell_parts(user_data_b64: str) -> list[str]:
    """The ``text/x-shellscript`` parts of a launch template's user data, split as cloud-init splits it."""
    msg = email.message_from_string(base64.b64decode(user_data_b64).decode())
    assert msg.is_multipart(), "an EKS managed node group merges only MIME multi-part user data"
    return [str(part.get_payload()) for part in msg.walk() if part.get_content_type() == "text/x-shellscript"]


def test_the_host_facts_are_sourced_and_the_bootstrapped_ones_install_something() -> None:
    for r in HOST_REQUIREMENTS:
        assert r.source in SOURCES and r.needs
        assert (r.feature in NODE_BOOTSTRAP_PROVIDES) == r.bootstrapped
        if r.bootstrapped:
            assert r.packages, f"{r.feature}: bootstrapped, but installs nothing"
        else:
            with pytest.raises(ValueError, match="no node bootstrap"):
                host_setup_script([r])
    assert host_setup_user_data([]) is None


def _stand_ins(tmp_path: Path, fail_times: int) -> Path:
    """A ``dnf`` that fails ``fail_times`` times before it succeeds (recording its arguments), and a ``sleep`` that
    returns at once, first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dnf").write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> "{tmp_path}/dnf.calls"\n'
        f'n=$(wc -l < "{tmp_path}/dnf.calls")\n'
        f"[ \"$n\" -gt {fail_times} ]\n"
    )
    (bin_dir / "sleep").write_text(f'#!/bin/bash\necho "$1" >> "{tmp_path}/sleep.calls"\n')
    for f in ("dnf", "sleep"):
        (bin_dir / f).chmod((bin_dir / f).stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _run_user_data(tmp_path: Path, fail_times: int) -> subprocess.CompletedProcess[str]:
    user_data = host_setup_user_data([FSX_CLIENT_HOST])
    assert user_data is not None
    (script,) = shell_parts(base64.b64encode(user_data.encode()).decode())
    path = tmp_path / "part-001"
    path.write_text(script)
    path.chmod(0o755)
    env = {**os.environ, "PATH": f"{_stand_ins(tmp_path, fail_times)}:{os.environ['PATH']}"}
    return subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=patient(60))


def test_the_user_data_installs_the_client_and_retries_a_mirror_not_yet_reachable(tmp_path: Path) -> None:
    done = _run_user_data(tmp_path, fail_times=2)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "dnf.calls").read_text().splitlines()
    assert calls == ["install -y " + " ".join(FSX_CLIENT_HOST.packages)] * 3


def test_the_user_data_fails_loudly_when_the_install_never_succeeds(tmp_path: Path) -> None:
    done = _run_user_data(tmp_path, fail_times=INSTALL_ATTEMPTS)
    assert done.returncode == 1
    assert len((tmp_path / "dnf.calls").read_text().splitlines()) == INSTALL_ATTEMPTS
    assert "lustre-client failed" in done.stderr
