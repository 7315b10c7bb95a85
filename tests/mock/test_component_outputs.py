"""Each typed output a component declares is registered (``register_outputs``), evaluated by the real program and the
components guide's example under mocks."""

import typing

import pulumi

import components
from tests.harness import guide_example, run_program, stack_names

COMPONENT_CLASSES = list(components.COMPONENTS)


def test_every_component_registers_each_output_it_declares(monkeypatch, tmp_path) -> None:
    """Each output a component declares (each public annotation: Outputs, plain values, resources) is in what it
    registers (``register_outputs``): the stack's state holds what the reference lists (the provider for other
    languages reads the attributes themselves). Every preset and the components guide's example, evaluated under
    mocks with the registrations recorded."""
    registered: dict[type, set[str]] = {}
    original = pulumi.ComponentResource.register_outputs

    def record(self: pulumi.ComponentResource, outputs: typing.Any) -> None:
        registered.setdefault(type(self), set()).update(outputs or {})
        original(self, outputs)

    monkeypatch.setattr(pulumi.ComponentResource, "register_outputs", record)
    for stack in stack_names():
        run_program(stack, fresh=True)
    main = tmp_path / "__main__.py"
    main.write_text(guide_example().replace("eks_training.", ""))
    run_program("dev", config={"aws:region": "us-west-2"}, main=main)
    missing = {}
    for cls in COMPONENT_CLASSES:
        # every public annotation is an output of the schema (the reference's table), plain values and resources too
        declared = {k for k in cls.__annotations__ if not k.startswith("_")}
        if cls in registered and declared - registered[cls]:
            missing[cls.__name__] = sorted(declared - registered[cls])
    assert missing == {}
    assert len(set(registered) & set(COMPONENT_CLASSES)) >= len(COMPONENT_CLASSES) - 2, sorted(
        c.__name__ for c in set(COMPONENT_CLASSES) - set(registered)
    )
