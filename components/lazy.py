"""A package's names imported on first use (PEP 562, https://peps.python.org/pep-0562/): importing the package, or a
light module in it, does not import every module it names, nor the cloud SDKs they need.

A package lists each name twice, as type checkers need: imported under ``if TYPE_CHECKING:`` (what mypy and readers
see), and in the map it gives :func:`lazy_exports` (what runs); tests/unit/test_lazy_imports.py holds the two equal."""

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, modules: Mapping[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name in ``modules[m]`` is imported from the submodule ``m`` when
    first asked for, then kept in the package."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
