"""``python -m stacks.preflight``."""

from stacks.preflight.cli import main
from stacks.stackfile import run_command

run_command(main)
