"""Order a resource after others so that a preview still sees its inputs when one of them is replaced.

Why: docs/explanation/pulumi-up.md, "Ordering that a preview can read"."""

import asyncio
from typing import Any, TypeVar, cast

import pulumi

T = TypeVar("T")


def ordered_after(value: pulumi.Output[T], *dependencies: pulumi.Input[Any]) -> pulumi.Output[T]:
    """``value`` once ``dependencies`` have resolved, carrying their resources: a resource that takes it is created
    after them and deleted before them, and a dependency that fails (an ``apply`` that raises) fails it too. Unlike
    ``Output.all(value, *dependencies)``, it is known whenever ``value`` is: a preview that replaces one of them does
    not show it unknown. One deleted before it is replaced (a Job) still replaces the resource that takes it: the
    engine diffs that input as unknown. Order after such a one by ``depends_on``
    (:func:`components.workloads.pods.created_after`)."""
    after = [pulumi.Output.from_input(d) for d in dependencies]

    async def resources() -> set[pulumi.Resource]:
        found = set(await value.resources())
        for d in after:
            found |= await d.resources()
        return found

    async def resolved() -> Any:
        for d in after:
            await d.future(with_unknowns=True)  # raises what a failed dependency raised
        return await value.future(with_unknowns=True)

    # each part a task at once, as the SDK's own apply makes its one: a program that ends first leaves no coroutine
    # that was never awaited
    parts = [asyncio.ensure_future(c) for c in (resources(), resolved(), value.is_known(), value.is_secret())]
    return pulumi.Output(parts[0], cast(Any, parts[1]), parts[2], parts[3])
