"""The component provider as Pulumi starts it: the schema served over gRPC by the real process."""

import json
import subprocess
import sys

import grpc
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

import components
from tests.harness import REPO
from tests.unit.test_component_schema import _schema, _untyped_or_undocumented
from tests.wait import patient


def test_provider_serves_the_schema_over_grpc() -> None:
    """The provider process `pulumi package add` starts: it prints its port and answers GetSchema."""
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "provider" / "__main__.py"), "127.0.0.1:1"],
        cwd=REPO / "provider",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            reply = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=patient(60))
        schema = json.loads(reply.schema)
    finally:
        proc.kill()
        proc.wait(timeout=patient(30))
    assert schema["name"] == components.PACKAGE_NAME and schema["version"] == components.__version__
    assert set(schema["resources"]) == set(_schema()["resources"])
    assert _untyped_or_undocumented(schema) == []
