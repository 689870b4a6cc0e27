"""Label keys, values and taints shared by every backend, and the keys the platform assigns itself."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from trainer_infra.config.base import StrictModel

# Kubernetes qualified names: optional DNS-subdomain prefix, then a name of at most 63 characters.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"

LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]

HOSTNAME = "kubernetes.io/hostname"
# Every node of a pool carries this label; the pool's ResourceFlavor selects on it, so two pools can
# never select each other's nodes.
POOL_LABEL = "trainer-platform.io/node-pool"
CAPACITY_TYPE_LABEL = "trainer-platform.io/capacity-type"
# Our own topology keys where the provider sets none (kwok, on-prem).
BLOCK_LABEL = "trainer-platform.io/block"
RACK_LABEL = "trainer-platform.io/rack"
DEFAULT_TOPOLOGY = (BLOCK_LABEL, RACK_LABEL, HOSTNAME)


def level_name(key: str) -> str:
    """The short name of a topology level, used in placement policies: `trainer-platform.io/rack` → `rack`."""
    return key.rsplit("/", 1)[-1]


class Taint(StrictModel):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def as_k8s(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def toleration(self) -> dict[str, str]:
        """The exact toleration for this taint (Equal on the value, or Exists when it has none)."""
        if self.value:
            return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


GPU_TAINT = Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule")


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


TaintList = Annotated[list[Taint], Field(max_length=8)]
