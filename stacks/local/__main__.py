"""``python -m stacks.local``: an alias of ``python -m stacks local`` (see :mod:`stacks.cli`)."""

from stacks.cli import alias

alias("local")
