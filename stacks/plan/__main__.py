"""``python -m stacks.plan``: an alias of ``python -m stacks plan`` (see :mod:`stacks.cli`)."""

from stacks.cli import alias

alias("plan")
