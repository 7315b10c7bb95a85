"""The dev stack's last update as the engine returns it to the next one: the configuration it exported
(:func:`deployed`), and the stack file of the next update (:func:`pinned`). The mock tier's ``last_outputs`` fixture
holds the last update's outputs (tests/mock/conftest.py)."""

import copy
import json
from typing import Any

from components.catalog import DEFAULT_KUBERNETES_VERSION, SUPPORTED_KUBERNETES_VERSIONS
from components.catalog.platform import minor_number
from stacks.mocked import ORGANIZATION
from tests.harness import PROJECT, stack_config

P = f"{PROJECT}:"
SELF = f"{ORGANIZATION}/{PROJECT}/dev"
#: dev's minor (the default).
NOW = DEFAULT_KUBERNETES_VERSION
#: The minor before dev's (the default) and the one before that, from the catalog.
PREVIOUS, SKIPPED = (SUPPORTED_KUBERNETES_VERSIONS[SUPPORTED_KUBERNETES_VERSIONS.index(NOW) - i] for i in (1, 2))
#: A minor past the default, as EKS may run a cluster whose stack left its minor to the default (not in the catalog).
NEXT = f"{minor_number(NOW)[0]}.{minor_number(NOW)[1] + 1}"


def deployed(**cluster: Any) -> str:
    """The dev stack's configuration with ``cluster`` settings changed, as its update exported it (with the minor it
    deployed)."""
    config = copy.deepcopy(stack_config("dev"))
    config[P + "cluster"] = {"kubernetesVersion": NOW, **(config.get(P + "cluster") or {}), **cluster}
    config.setdefault(P + "preflight", {"enabled": False})
    return json.dumps(config, sort_keys=True)


def pinned(**cluster: Any) -> dict[str, Any]:
    """The dev stack's configuration with its minor set to today's default (and ``cluster`` settings)."""
    config = copy.deepcopy(stack_config("dev"))
    config[P + "cluster"] = {**(config.get(P + "cluster") or {}), "kubernetesVersion": NOW, **cluster}
    return config
