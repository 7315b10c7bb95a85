"""Order a resource after others without waiting on their values, so that a preview still sees its inputs.

Why: docs/explanation/pulumi-up.md, "Ordering that a preview can read"."""

from typing import Any, TypeVar, cast

import pulumi

T = TypeVar("T")


def ordered_after(value: pulumi.Output[T], *dependencies: pulumi.Input[Any]) -> pulumi.Output[T]:
    """``value``, known whenever it is, carrying the resources behind ``dependencies``: a resource that takes it is
    created after them and deleted before them, as with ``depends_on``. ``Output.all(value, *dependencies)`` orders
    the same, but a preview that replaces one of them shows the value unknown, and the resource replaced with it."""
    out = value
    after = [pulumi.Output.from_input(d) for d in dependencies]

    async def resources() -> set[pulumi.Resource]:
        found = set(await out.resources())
        for d in after:
            found |= await d.resources()
        return found

    return pulumi.Output(resources(), cast(Any, out.future(with_unknowns=True)), out.is_known(), out.is_secret())
