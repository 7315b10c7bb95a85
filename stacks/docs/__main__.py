"""``python -m stacks.docs``: the command ``python -m stacks docs``."""

from stacks.cli import alias

alias("docs")
