"""Composition of the components into whole environments, driven by validated stack config."""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # Python is locating a module of this package to run (python -m stacks.plan)
    from .cli import import_alias

    import_alias(__name__)
