"""``python -m stacks.box``: an alias of ``python -m stacks box`` (see :mod:`stacks.cli`)."""

from stacks.cli import alias

alias("box")
