"""A component's Kubernetes provider, kept for its Kubernetes objects only.

The Python SDK registers a component only once every provider in its ``opts`` exists (it sends their references with
the registration), and each child waits for its parent's registration. A component that makes AWS resources and
Kubernetes objects, given the cluster's provider in ``opts``, would therefore start its AWS resources (a file system
that takes minutes) only once the cluster's nodes are up, the moment that provider's kubeconfig resolves. With
:func:`split_kubernetes_provider` the component registers without the provider and hands it to its Kubernetes
objects alone: its AWS resources start at once, its Kubernetes objects still wait for the cluster and go before it on
``pulumi destroy``.
"""

import copy
from typing import Mapping, Optional

import pulumi

#: The package of pulumi-kubernetes' providers.
KUBERNETES = "kubernetes"


def split_kubernetes_provider(
    opts: Optional[pulumi.ResourceOptions],
) -> tuple[pulumi.ResourceOptions, Optional[pulumi.ProviderResource]]:
    """``opts`` without its Kubernetes provider (``provider``, or ``providers`` by package), and that provider
    (``None`` when ``opts`` names none: the children then find one through the parent, as before)."""
    rest = copy.copy(opts) if opts is not None else pulumi.ResourceOptions()
    found: Optional[pulumi.ProviderResource] = None
    if isinstance(rest.provider, pulumi.ProviderResource) and rest.provider.package == KUBERNETES:
        found, rest.provider = rest.provider, None
    providers = rest.providers
    if isinstance(providers, Mapping):
        if KUBERNETES in providers:
            found = found or providers[KUBERNETES]
            rest.providers = {k: v for k, v in providers.items() if k != KUBERNETES}
    elif providers:
        kept = [p for p in providers if p.package != KUBERNETES]
        found = found or next((p for p in providers if p.package == KUBERNETES), None)
        rest.providers = kept
    return rest, found
