"""``python -m stacks.preflight``."""

import sys

from stacks.preflight.cli import main

sys.exit(main())
