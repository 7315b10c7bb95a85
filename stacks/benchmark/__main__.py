"""Entry point of ``python -m stacks.benchmark``."""

from stacks.benchmark.cli import main
from stacks.stackfile import run_command

run_command(main)
