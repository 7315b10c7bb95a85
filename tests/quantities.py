"""Kubernetes quantities as the API server writes them back (apimachinery's ``Quantity.CanonicalizeBytes``,
https://github.com/kubernetes/apimachinery/blob/v0.36.3/pkg/api/resource/quantity.go), written apart from the
program's :mod:`components.quantities`, and where they are in the objects the program registers."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Iterator

#: The keys whose values are quantities, in the objects this program registers (a container's requests and limits,
#: a claim's, a volume's capacity, an emptyDir's size, a Kueue quota).
QUANTITY_KEYS = {"sizeLimit", "nominalQuota", "borrowingLimit", "lendingLimit"}
QUANTITY_MAPS = {"requests", "limits", "capacity"}

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)$")


def canonical(text: str) -> str:
    """``text`` as the API server prints it back (whole numbers and the suffixes this program uses)."""
    m = _QUANTITY.match(text)
    assert m, f"not a quantity: {text!r}"
    number, suffix = Decimal(m.group(1)), m.group(2)
    if suffix in _BINARY:
        value, binary = number * 1024 ** _BINARY[suffix], True
    elif suffix[:1] in ("e", "E"):
        return text  # decimal exponent form: this program writes none
    else:
        value, binary = number * Decimal(10) ** _DECIMAL[suffix], False
    if value == 0:
        return "0"
    if binary and abs(value) >= 1024 and value == value.to_integral_value():
        whole = int(value)
        power = max(p for p in range(7) if whole % 1024**p == 0)
        return f"{whole // 1024**power}{next((s for s, p in _BINARY.items() if p == power), '')}"
    # decimal: the largest exponent, a multiple of 3, that leaves a whole mantissa (at least nano)
    for exponent in range(18, -10, -3):
        mantissa = value / Decimal(10) ** exponent
        if mantissa == mantissa.to_integral_value():
            return f"{int(mantissa)}{next(s for s, e in _DECIMAL.items() if e == exponent)}"
    raise AssertionError(f"{text!r} is finer than a nano")


def quantities(doc: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """(path, value) of every quantity in ``doc``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            path = f"{where}.{k}" if where else k
            if k in QUANTITY_MAPS and isinstance(v, dict) and all(isinstance(x, (str, int)) for x in v.values()):
                yield from ((f"{path}.{r}", str(x)) for r, x in v.items())
            elif k in QUANTITY_KEYS and isinstance(v, (str, int)):
                yield path, str(v)
            else:
                yield from quantities(v, path)
    elif isinstance(doc, list):
        for i, x in enumerate(doc):
            yield from quantities(x, f"{where}[{i}]")
