"""Kubernetes quantities as exact Decimals, and back to the canonical strings manifests carry."""

from __future__ import annotations

import re
from decimal import Decimal

from trainer_infra.core.upstream.kubernetes import EPHEMERAL_STORAGE


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """A Kubernetes quantity string: whole numbers plain, fractions of a core as millicores, bytes in
    the largest binary unit that divides them."""
    if binary and value == value.to_integral_value():
        whole = int(value)
        for suffix, size in (("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return str(value.normalize())


def format_amount(resource: str, value: Decimal) -> str:
    """An amount of one resource as manifests and messages write it: bytes (memory, node disk, huge pages) in
    binary units, the rest as plain numbers or millicores. The one place that knows which resource counts bytes."""
    counts_bytes = resource in ("memory", EPHEMERAL_STORAGE) or resource.startswith("hugepages-")
    return format_quantity(value, binary=counts_bytes)


_SUFFIX = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate(("k", "M", "G", "T", "P", "E"))},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
}


_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")


def quantity(text: str) -> Decimal:
    """A Kubernetes quantity as an exact Decimal. Hand-written because `kubernetes.utils.parse_quantity`
    imports the whole client (0.75 s on every run)."""
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    number, suffix = match.group(1), match.group(2) or ""
    if suffix not in _SUFFIX:  # a decimal exponent, e.g. 1e3
        return Decimal(number + suffix)
    return Decimal(number) * _SUFFIX[suffix]
