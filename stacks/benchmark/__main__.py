"""Entry point of ``python -m stacks.benchmark``."""

import sys

from stacks.benchmark.cli import main

sys.exit(main())
