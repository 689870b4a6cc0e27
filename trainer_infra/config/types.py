"""Constrained scalar types shared by config models (Kubernetes names, quantities, versions)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, StringConstraints

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Kubernetes resource.Quantity, e.g. 500m, 2Gi, 1.5, 8
QUANTITY = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$"


def _number_to_str(v: Any) -> Any:
    # YAML reads `cpu: 2` as an int; Kubernetes wants a quantity string.
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return str(v)
    return v


DnsLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
Quantity = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=QUANTITY)]
SemVer = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=r"^\d+\.\d+\.\d+$")]
KubeMinor = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=r"^1\.\d{2}$")]
