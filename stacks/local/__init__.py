"""Run a stack's jobs on this machine, without AWS, before paying for a cluster: ``python -m stacks.local --stack
NAME``.

The pods' commands and environments come from the same functions the components use; see :mod:`stacks.local.runner`.
"""

from stacks.local.report import LocalRunError
from stacks.local.runner import LocalRunner

__all__ = ["LocalRunError", "LocalRunner"]
