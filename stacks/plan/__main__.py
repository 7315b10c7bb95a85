"""``python -m stacks.plan``: the plan of a stack, offline (see :mod:`stacks.plan.report`)."""

import sys

from stacks.plan.report import main

sys.exit(main())
