"""The Kubernetes provider a component's objects are made with: the cluster's, never the machine's by accident.

A Kubernetes object without a provider goes through pulumi-kubernetes' default provider, which targets the cluster the
kubeconfig's current context names (or the stack's ``kubernetes:`` settings). A component given no provider would put
its objects there, whatever cluster that is (https://www.pulumi.com/docs/iac/concepts/resources/providers/#default-providers).
"""

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
