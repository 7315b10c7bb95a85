"""``python -m stacks.plan``: the plan of a stack, offline (see :mod:`stacks.plan.report`)."""

from stacks.plan.report import main
from stacks.stackfile import run_command

run_command(main)
