"""Loading a stack configuration made of a few sections, as ``pulumi up`` does, for the rule tests; the bundled
trainer's own defaults, which apply where a job's key is unset."""

import importlib
import inspect
import pkgutil
from typing import Any

import stacks.config
from stacks.config import ConfigError, load_config
from stacks.config.base import Model
from stacks.plan import build_plan
from stacks.plan.report import report
from stacks.plan.timeline import first_step
from stacks.stackfile import REPO
from tests.harness import PROJECT, run_program, stack_config

#: A p5 group pinned to one zone, a CPU group and a two-node training job on the p5 group.
P5 = {"instanceTypes": ["p5.48xlarge"], "minSize": 0, "desiredSize": 2, "maxSize": 2, "availabilityZone": "us-east-1a"}
CPU = {"instanceTypes": ["m5.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 1}
TRAIN = {"kind": "pytorch", "script": "/app/train.py", "nodeGroup": "h100", "nodes": 2}


def problems(**sections: Any) -> list[str]:
    """The problems ``pulumi up`` reports for a stack made of ``sections`` (camelCase keys; [] when it loads)."""
    cfg = {"aws:region": "us-east-1", **{f"eks-training:{k}": v for k, v in sections.items()}}
    try:
        load_config("eks-training", "rules", cfg)
    except ConfigError as exc:
        return exc.problems
    return []


def without(d: dict[str, Any], *keys: str, **extra: Any) -> dict[str, Any]:
    """``d`` without ``keys``, with ``extra``."""
    return {**{k: v for k, v in d.items() if k not in keys}, **extra}


def stack_report(stack: str) -> dict[str, Any]:
    """What ``python -m stacks.plan --stack <stack> --json`` prints, built in-process (its path to the first training
    step from the tests' shared evaluation of the program, :func:`tests.harness.run_program`)."""
    cfg = stack_config(stack)
    plan = build_plan(load_config(PROJECT, stack, cfg))
    first = first_step(plan, run_program(stack).registrations)
    return report(plan, cfg.get("aws:region"), first, stack_file=REPO / f"Pulumi.{stack}.yaml")


def trainer_defaults() -> dict[str, Any]:
    """Each variable of the bundled trainer's environment -> the default of the flag it sets
    (``training/train_flags.py``: ``ENV_DEFAULTS``), read with no such variable set."""
    import argparse
    import os

    from training import train_flags

    saved = {v: os.environ.pop(v) for v in train_flags.ENV_DEFAULTS.values() if v in os.environ}
    try:  # a flag's default reads its variable when the flag is added
        parser = argparse.ArgumentParser()
        for add in (name for name in dir(train_flags) if name.startswith("add_") and name.endswith("_flags")):
            getattr(train_flags, add)(parser)
        return {v: parser.get_default(dest) for dest, v in train_flags.ENV_DEFAULTS.items()}
    finally:
        os.environ.update(saved)


def config_models() -> dict[str, Any]:
    """Every config model class of ``stacks/config/`` by name (each :class:`stacks.config.base.Model` subclass, in the
    module that defines it)."""
    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(stacks.config.__path__, "stacks.config."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Model) and cls is not Model and cls.__module__ == module.__name__:
                found[cls.__name__] = cls
    return found
