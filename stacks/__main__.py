"""``python -m stacks <command>``: the project's one command line (see :mod:`stacks.cli`)."""

from stacks.cli import main, run_command

run_command(main)
