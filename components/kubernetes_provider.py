"""The Kubernetes provider a component's objects are made with: the cluster's, never the machine's by accident.

A Kubernetes object without a provider goes through pulumi-kubernetes' default provider, which targets the cluster the
kubeconfig's current context names (or the stack's ``kubernetes:`` settings). A component given no provider would put
its objects there, whatever cluster that is (https://www.pulumi.com/docs/iac/concepts/resources/providers/#default-providers).
"""

import os
from typing import Optional

import pulumi

#: A type token of pulumi-kubernetes, to ask a resource which provider its Kubernetes children get.
_KUBERNETES_TYPE = "kubernetes:core/v1:Namespace"


def warn_without_kubernetes_provider(
    component: pulumi.ComponentResource, name: str, given: Optional[pulumi.ProviderResource] = None
) -> None:
    """Warn when ``component``'s Kubernetes objects would go through the default provider: no provider ``given`` (one
    the component took out of its options) and none in its options or its parent's."""
    if given is None and component.get_provider(_KUBERNETES_TYPE) is None:
        pulumi.log.warn(
            f"{name}: no Kubernetes provider in its options, so its Kubernetes objects go to the default provider: "
            "the cluster your kubeconfig's current context names. Pass the cluster's k8s.Provider "
            "(opts=pulumi.ResourceOptions(provider=...)), or disable the default one: pulumi config set --path "
            "'pulumi:disable-default-providers[0]' kubernetes",
            resource=component,
        )


#: The environment variable pulumi-kubernetes' SDK copies into a provider that does not set ``delete_unreachable``
#: (``pulumi_kubernetes/provider.py``): the provider then drops every object from the state when a refresh cannot
#: reach the cluster.
DELETE_UNREACHABLE_ENV = "PULUMI_K8S_DELETE_UNREACHABLE"


#: The values the SDK reads as a boolean (Go's strconv.ParseBool, as ``pulumi_kubernetes._utilities.get_env_bool``).
_BOOLEANS = ("1", "t", "T", "true", "TRUE", "True", "0", "f", "F", "false", "FALSE", "False")


def warn_if_delete_unreachable_set(provider: pulumi.ProviderResource) -> None:
    """Warn when ``PULUMI_K8S_DELETE_UNREACHABLE`` is set while the program runs: the provider stores its value. True,
    a later refresh that cannot reach the cluster (credentials, network) drops every Kubernetes object from the state;
    false, it outweighs the variable on the one command that should drop them, once the cluster is gone."""
    if os.environ.get(DELETE_UNREACHABLE_ENV) in _BOOLEANS:
        pulumi.log.warn(
            f"{DELETE_UNREACHABLE_ENV} is set: this Kubernetes provider stores its value. Set to true, a later refresh "
            "that cannot reach the cluster would drop every Kubernetes object from the stack's state. Unset it and "
            "run `pulumi up` again; set it only on the one command that removes a cluster already gone "
            "(troubleshooting: `pulumi destroy` cannot reach the cluster)",
            resource=provider,
        )
