"""Kubernetes quantities (CPU, memory, sizes): written in the canonical form the API server writes back, and read as
numbers. Why the form matters: docs/explanation/pulumi-up.md, "When a job's object is replaced"."""

import re
from fractions import Fraction

#: Each suffix's factor to the base unit.
_UNITS = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    **{s: Fraction(1000**i) for i, s in enumerate("kMGTPE", 1)},
    **{s: Fraction(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
}
#: Binary units by size in MiB, the largest first.
_BINARY = (("Ei", 1024**4), ("Pi", 1024**3), ("Ti", 1024**2), ("Gi", 1024), ("Mi", 1))
#: Decimal units by size in thousandths, the largest first.
_DECIMAL = (("E", 10**21), ("P", 10**18), ("T", 10**15), ("G", 10**12), ("M", 10**9), ("k", 10**6), ("", 10**3))


def mebibytes(mib: int) -> str:
    """``mib`` MiB in the largest binary unit that holds it whole: 65536 is ``64Gi``, 1536 stays ``1536Mi``."""
    if mib == 0:
        return "0"
    return next(f"{mib // size}{unit}" for unit, size in _BINARY if mib % size == 0)


def value_of(text: object) -> Fraction:
    """A quantity's exact value in its base unit (cores, bytes, a count): ``3100m`` is 31/10, ``64Gi`` is 2**36."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?", str(text))
    if m is None:
        raise ValueError(f"not a quantity: {text!r}")
    return Fraction(m.group(1)) * _UNITS[m.group(2) or ""]


def mebibytes_of(text: str) -> int:
    """A quantity of bytes, such as ``64Gi`` or the catalog's ``5120Mi``, in whole MiB."""
    return int(value_of(text) / 2**20)


def millicores_of(text: str) -> int:
    """A quantity of cores, such as ``4`` or ``3100m``, in thousandths."""
    return int(value_of(text) * 1000)


def millicores(millis: int) -> str:
    """``millis`` thousandths in the largest decimal unit that holds them whole: 4000 is ``4``, 3100 stays ``3100m``."""
    if millis == 0:
        return "0"
    return next((f"{millis // size}{unit}" for unit, size in _DECIMAL if millis % size == 0), f"{millis}m")
