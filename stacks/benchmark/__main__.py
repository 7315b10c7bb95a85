"""``python -m stacks.benchmark``: an alias of ``python -m stacks benchmark`` (see :mod:`stacks.cli`)."""

from stacks.cli import alias

alias("benchmark")
