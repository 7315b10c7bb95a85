"""``python -m stacks.preflight``: an alias of ``python -m stacks preflight`` (see :mod:`stacks.cli`)."""

from stacks.cli import alias

alias("preflight")
