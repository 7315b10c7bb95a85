"""``python -m stacks.box build|up|down``: see :mod:`stacks.box.cli`."""

import sys

from stacks.box.cli import main

sys.exit(main())
