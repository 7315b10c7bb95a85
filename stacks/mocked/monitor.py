"""What the engine sees of the program: :class:`RecordingMonitor` records each registration (:class:`Registration`)."""

from dataclasses import dataclass, field
from typing import Any, Optional

from pulumi.runtime import mocks as pmocks
from pulumi.runtime import rpc

UNKNOWN = rpc.UNKNOWN


@dataclass
class Registration:
    """One RegisterResource request as the engine would see it."""

    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    remote: bool
    provider: str
    """The provider reference (``urn::id``) of a custom resource."""
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    inputs: dict[str, Any]
    retain_on_delete: Optional[bool]
    deleted_with: str
    protect: bool = False
    delete_before_replace: bool = False
    """The ``deleteBeforeReplace`` option: a replacement deletes the old resource before it creates the new one."""
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    """The ``replaceOnChanges`` option: a change under one of these paths replaces the resource."""
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """The ``customTimeouts`` option (``create``, ``update``, ``delete``: Go durations), those set."""
    outputs: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    providers: dict[str, str] = field(default_factory=dict)
    """Package -> provider reference (``urn::id``) a component was given (``opts.provider``/``providers``): the SDK
    waits for each provider to exist before it registers the component, and so do its children."""

    def deps_of(self, prop: str) -> list[str]:
        """URNs the property ``prop`` depends on."""
        return self.property_dependencies.get(prop, [])


class RecordingMonitor(pmocks.MockMonitor):
    """A MockMonitor that records every registration and rejects duplicate URNs."""

    def __init__(self, mocks: pmocks.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.reads: list[tuple[str, str, str]] = []
        """(type, name, id) of every existing resource the program read (``Resource.get``)."""
        self._urns: set[str] = set()

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        self.reads.append((request.type, request.name, request.id))
        return super().ReadResource(request)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type != "pulumi:pulumi:Stack":
            if urn in self._urns:
                raise Exception(f"duplicate URN registered: {urn}")
            self._urns.add(urn)
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        pmocks._ensure_event_loop()
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        reg = Registration(
            type=request.type,
            name=request.name,
            urn=urn,
            parent=request.parent,
            custom=bool(request.custom),
            remote=bool(request.remote),
            provider=request.provider,
            dependencies=list(request.dependencies),
            property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
            inputs=inputs,
            retain_on_delete=request.retainOnDelete if request.HasField("retainOnDelete") else None,
            deleted_with=request.deletedWith,
            protect=bool(request.protect) if request.HasField("protect") else False,
            delete_before_replace=bool(request.deleteBeforeReplace),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            custom_timeouts={
                k: v
                for k in ("create", "update", "delete")
                if (v := getattr(request.customTimeouts, k))
                if request.HasField("customTimeouts")
            },
            outputs=self.resources[urn].state if urn in self.resources else {},
            id=self.resources[urn].id if urn in self.resources else "",
            providers=dict(request.providers),
        )
        self.registrations.append(reg)
        return response
