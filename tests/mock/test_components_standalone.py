"""The components work on their own in another project's program: the README's example runs under mocks."""

import re
from pathlib import Path


from tests.harness import REPO, run_program


def readme_example(tmp_path: Path) -> Path:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Using the components from another project", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "README has a python example of using the components"
    assert "from eks_training.components import" in code.group(1)
    path = tmp_path / "__main__.py"
    # the package as the checkout names it (setup.py installs components as eks_training.components;
    # tests/real/test_installed_real.py runs the example as written, from an install)
    path.write_text(code.group(1).replace("from eks_training.components import", "from components import"))
    return path


def test_readme_example_registers_the_components(tmp_path: Path) -> None:
    for preview in (False, True):
        p = run_program("dev", preview=preview, config={"aws:region": "us-west-2"}, main=readme_example(tmp_path))
        types = [r.type for r in p.registrations]
        for t in ("TrainingVpc", "TrainingCluster", "TrainingNodeGroup", "DevicePlugin"):
            assert f"eks-training:index:{t}" in types
        gpu_ng = p.one("aws:eks/nodeGroup:NodeGroup", lambda r: r.inputs["labels"]["eks-training/role"] == "gpu")
        assert gpu_ng.inputs["amiType"] == "AL2023_x86_64_NVIDIA", "GPU facts come from the catalog"
        assert {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"} in gpu_ng.inputs["taints"]
        assert len(p.of_type("aws:ec2/subnet:Subnet")) == 4


def test_harness_rejects_duplicate_urns(tmp_path: Path) -> None:
    """Control: the harness's monitor fails a program that registers the same URN twice."""
    main = tmp_path / "__main__.py"
    main.write_text("import pulumi_aws as aws\naws.s3.Bucket('same-name')\naws.s3.Bucket('same-name')\n")
    p = run_program("dev", config={"aws:region": "us-east-1"}, main=main, expect_error=True)
    assert p.error is not None and "duplicate URN registered" in str(p.error) and "same-name" in str(p.error)
