"""Constrained scalar types shared by config models (Kubernetes names, quantities, versions)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from trainer_infra.core import kube
from trainer_infra.core.quantity import quantity

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
# A Go duration as Kubernetes configs take it (metav1.Duration), e.g. 10m, 1h30m, 45s
DURATION = r"^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$"

# What a pattern means to a person, and how to fix a value that misses it (used by error messages).
PATTERN_HELP: dict[str, tuple[str, str]] = {
    DNS_LABEL: ("a DNS label", "use lowercase a-z, 0-9 and '-', starting and ending with a letter or digit"),
    DNS_SUBDOMAIN: ("a DNS subdomain", "use lowercase a-z, 0-9, '-' and '.', at most 253 characters"),
    QUANTITY: ("a Kubernetes quantity", "e.g. 500m, 2, 1.5, 512Mi, 4Gi"),
    SEMVER: ('a version "MAJOR.MINOR.PATCH"', 'write it without a leading "v", e.g. "0.19.2"'),
    KUBE_MINOR: ('a Kubernetes minor version "1.NN"', 'quote it so YAML keeps it a string, e.g. "1.34"'),
    DURATION: ("a duration", "e.g. 10m, 1h30m or 45s"),
}

DnsLabel = Annotated[str, StringConstraints(pattern=DNS_LABEL, max_length=63)]
DnsSubdomain = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN, max_length=253)]
Quantity = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=QUANTITY)]
SemVer = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=SEMVER)]
KubeMinor = Annotated[str, BeforeValidator(_number_to_str), StringConstraints(pattern=KUBE_MINOR)]
Duration = Annotated[str, StringConstraints(pattern=DURATION)]

# Kubernetes qualified names: optional DNS-subdomain prefix, then a name of at most 63 characters.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"

LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]


def _checked(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    """An AfterValidator from a `core/kube.py` rule: the rule's sentence becomes the error message."""

    def check(value: str) -> str:
        if (message := problem(value)) is not None:
            raise ValueError(message)
        return value

    return check


def _not_negative(value: str) -> str:
    if quantity(value) < 0:
        raise ValueError("must not be negative")
    return value


def _positive(value: str) -> str:
    if quantity(value) <= 0:
        raise ValueError("must be more than 0")
    return value


# What the API server accepts, as types (the rules live in core/kube.py): a value that would be refused at
# `pulumi up` is refused where it is written.
Int32 = Annotated[int, Field(ge=kube.INT32_MIN, le=kube.INT32_MAX)]
PositiveInt32 = Annotated[int, Field(ge=1, le=kube.INT32_MAX)]
NonNegativeQuantity = Annotated[
    str, BeforeValidator(_number_to_str), StringConstraints(pattern=QUANTITY), AfterValidator(_not_negative)
]
PositiveQuantity = Annotated[
    str, BeforeValidator(_number_to_str), StringConstraints(pattern=QUANTITY), AfterValidator(_positive)
]
ExtendedResource = Annotated[str, AfterValidator(_checked(kube.extended_resource_problem))]
SecretKey = Annotated[str, AfterValidator(_checked(kube.secret_key_problem))]
ImageRef = Annotated[str, AfterValidator(_checked(kube.image_reference_problem))]
Host = Annotated[str, AfterValidator(_checked(kube.host_problem))]
ContainerResource = Annotated[str, AfterValidator(_checked(kube.container_resource_problem))]
