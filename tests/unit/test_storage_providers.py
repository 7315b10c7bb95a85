"""A storage component registers without its Kubernetes provider (the SDK would wait for it before any child: the file
system would start only once the cluster's nodes are up) and hands it to its Kubernetes objects
(:func:`components.storage.providers.split_kubernetes_provider`)."""

from typing import Optional

import pulumi
import pytest

from components.storage.providers import split_kubernetes_provider


def _provider(package: str) -> pulumi.ProviderResource:
    class Fake(pulumi.ProviderResource):
        def __init__(self) -> None:  # not registered: only its package is read
            self.package = package

    return Fake()


@pytest.mark.parametrize("form", ["provider", "providers-dict", "providers-list"])
def test_a_storage_component_registers_without_its_kubernetes_provider(form: str) -> None:
    kube, aws = _provider("kubernetes"), _provider("aws")
    opts = {
        "provider": pulumi.ResourceOptions(provider=kube, protect=True),
        "providers-dict": pulumi.ResourceOptions(providers={"kubernetes": kube, "aws": aws}, protect=True),
        "providers-list": pulumi.ResourceOptions(providers=[kube, aws], protect=True),
    }[form]
    rest, found = split_kubernetes_provider(opts)
    assert found is kube and rest.protect is True
    assert rest.provider is None
    kept = rest.providers if not isinstance(rest.providers, dict) else list(rest.providers.values())
    assert kube not in (kept or []) and (form == "provider" or aws in (kept or []))
    assert opts.provider is kube or opts.providers, "the caller's options are left as they were"


def test_options_without_a_kubernetes_provider_are_kept() -> None:
    aws = _provider("aws")
    rest, found = split_kubernetes_provider(pulumi.ResourceOptions(provider=aws))
    assert found is None and rest.provider is aws
    none: Optional[pulumi.ResourceOptions] = None
    assert split_kubernetes_provider(none)[1] is None
