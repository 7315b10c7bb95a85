"""The dev stack's last update as the engine returns it to the next one: the configuration it exported
(:func:`deployed`), where the mock tier's ``last_outputs`` fixture keeps its outputs (tests/mock/conftest.py)."""

import copy
import json
from typing import Any

from components.catalog import DEFAULT_KUBERNETES_VERSION
from stacks.mocked import ORGANIZATION
from tests.harness import PROJECT, stack_config

P = f"{PROJECT}:"
SELF = f"{ORGANIZATION}/{PROJECT}/dev"
#: dev's minor (the default).
NOW = DEFAULT_KUBERNETES_VERSION


def deployed(**cluster: Any) -> str:
    """The dev stack's configuration with ``cluster`` settings changed, as its update exported it (with the minor it
    deployed)."""
    config = copy.deepcopy(stack_config("dev"))
    config[P + "cluster"] = {"kubernetesVersion": NOW, **(config.get(P + "cluster") or {}), **cluster}
    config.setdefault(P + "preflight", {"enabled": False})
    return json.dumps(config, sort_keys=True)
