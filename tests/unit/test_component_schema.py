"""Every exported component is usable from other Pulumi languages: Pulumi's schema analyzer infers a
schema from the Python annotations with every input and output typed and described, and the
provider in provider/ (what ``pulumi package add`` runs) serves that schema over its gRPC interface."""

from typing import Any

import yaml
from pulumi.provider.experimental.schema import generate_schema

import components
from tests.harness import REPO
from tests.python_source import component_analysis


def _schema() -> dict[str, Any]:
    result = component_analysis(components.PACKAGE_NAME, components.COMPONENTS)
    deps = sorted(result["dependencies"], key=lambda d: d.name)
    spec = generate_schema(
        components.PACKAGE_NAME,
        components.__version__,
        None,
        result["component_definitions"],
        result["type_definitions"],
        deps,
    )
    return spec.to_json()


def _untyped_or_undocumented(schema: dict[str, Any]) -> list[str]:
    bad = []

    def props(where: str, properties: dict[str, Any]) -> None:
        for name, spec in properties.items():
            if not spec.get("description"):
                bad.append(f"{where}.{name}: no description")
            if not (spec.get("type") or spec.get("$ref")):
                bad.append(f"{where}.{name}: no type")

    for token, res in schema["resources"].items():
        assert res.get("isComponent"), token
        if not res.get("description"):
            bad.append(f"{token}: no description")
        props(f"{token} input", res.get("inputProperties") or {})
        props(f"{token} output", res.get("properties") or {})
        if not res.get("properties"):
            bad.append(f"{token}: no outputs")
    for token, typ in schema["types"].items():
        props(f"{token} type", typ.get("properties") or {})
    return bad


def test_every_component_has_a_typed_and_documented_schema() -> None:
    schema = _schema()
    assert set(schema["resources"]) == {f"eks-training:index:{c.__name__}" for c in components.COMPONENTS}
    assert _untyped_or_undocumented(schema) == []
    # spot checks of the inference: plain values stay plain, Inputs accept Outputs, nested types are refs
    ng = schema["resources"]["eks-training:index:TrainingNodeGroup"]["inputProperties"]
    assert ng["instanceTypes"]["type"] == "array" and ng["instanceTypes"]["items"]["type"] == "string"
    assert ng["taints"]["items"]["$ref"] == "#/types/eks-training:index:NodeTaint"
    job = schema["resources"]["eks-training:index:PyTorchJob"]["inputProperties"]
    assert job["placement"]["$ref"] == "#/types/eks-training:index:WorkerPlacement"
    assert job["job"]["$ref"] == "#/types/eks-training:index:JobSpec"
    assert {"eks-training:index:WorkerPlacement", "eks-training:index:JobSpec", "eks-training:index:Toleration"} <= set(
        schema["types"]
    )


def test_the_check_can_fail() -> None:
    """Control: a property without a description or type is reported."""
    schema = {
        "resources": {
            "x:index:C": {
                "isComponent": True,
                "description": "d",
                "inputProperties": {"a": {"type": "string"}},
                "properties": {"b": {"description": "b"}},
            }
        },
        "types": {},
    }
    assert _untyped_or_undocumented(schema) == ["x:index:C input.a: no description", "x:index:C output.b: no type"]


def test_plugin_manifest_runs_the_provider_with_the_library_requirements() -> None:
    manifest = yaml.safe_load((REPO / "provider" / "PulumiPlugin.yaml").read_text())
    assert manifest["runtime"]["name"] == "python"
    assert (REPO / "provider" / "requirements.txt").read_text().splitlines()[-1] == "-r ../requirements.txt"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'version = "{components.__version__}"' in pyproject
