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


DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SEMVER = r"^\d+\.\d+\.\d+$"
KUBE_MINOR = r"^1\.\d{2}$"

# What a pattern means to a person, and how to fix a value that misses it (used by error messages).
PATTERN_HELP: dict[str, tuple[str, str]] = {
    DNS_LABEL: ("a DNS label", "use lowercase a-z, 0-9 and '-', starting and ending with a letter or digit"),
    DNS_SUBDOMAIN: ("a DNS subdomain", "use lowercase a-z, 0-9, '-' and '.', at most 253 characters"),
    QUANTITY: ("a Kubernetes quantity", "e.g. 500m, 2, 1.5, 512Mi, 4Gi"),
    SEMVER: ('a version "MAJOR.MINOR.PATCH"', 'write it without a leading "v", e.g. "0.19.2"'),
    KUBE_MINOR: ('a Kubernetes minor version "1.NN"', 'quote it so YAML keeps it a string, e.g. "1.34"'),
}

DnsLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
DnsSubdomain = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN, max_length=253)]
Quantity = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=QUANTITY)]
SemVer = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=SEMVER)]
KubeMinor = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=KUBE_MINOR)]

# Kubernetes qualified names: optional DNS-subdomain prefix, then a name of at most 63 characters.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"

LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]
