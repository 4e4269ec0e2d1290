"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``'s ``resource.Quantity`` grammar), as
pure functions: the settings validate a stack's quantities with them, preflight adds up a node's requests with them.
"""

from __future__ import annotations

import re
from decimal import Decimal

# resource.Quantity: <sign>?<number><suffix>, suffix binary SI, decimal SI or a decimal exponent.
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX_FACTORS = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
}


def quantity(value: str) -> list[str]:
    """A ``resource.Quantity``: e.g. ``500m``, ``2``, ``1.5``, ``1Gi``, ``1e3``."""
    if not _QUANTITY.match(value):
        return ["is not a Kubernetes quantity (e.g. '500m', '2', '1.5', '1Gi')"]
    return []


def quantity_value(value: str) -> Decimal:
    """The number a valid quantity stands for: ``500m`` -> 0.5, ``1Ki`` -> 1024, ``1e3`` -> 1000."""
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    sign, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    magnitude = Decimal(number if not number.endswith(".") else number[:-1] or "0")
    factor = Decimal(f"1{suffix}") if suffix[:1] in ("e", "E") else _SUFFIX_FACTORS[suffix]
    return -(magnitude * factor) if sign == "-" else magnitude * factor
