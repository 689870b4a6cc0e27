"""What the three controller components share: their config model and the chart-values helpers."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.config.base import StrictModel
from trainer_infra.config.types import DnsLabel, Quantity, SemVer


class Resources(StrictModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)

    def as_k8s(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.requests:
            out["requests"] = dict(sorted(self.requests.items()))
        if self.limits:
            out["limits"] = dict(sorted(self.limits.items()))
        return out


def default_resources() -> Resources:
    # Requests so controllers are never BestEffort (first evicted under pressure); a memory limit
    # only, as CPU limits throttle webhooks into timeouts.
    return Resources(requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "1Gi"})


class ControllerConfig(StrictModel):
    """Settings every controller has. `version` and `namespace` default from the compatibility matrix."""

    version: SemVer | None = None
    namespace: DnsLabel | None = None
    replicas: int = Field(default=1, ge=1, le=10)
    resources: Resources = Field(default_factory=default_resources)
    feature_gates: dict[str, bool] = Field(default_factory=dict)
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra Helm values merged last (escape hatch; what you set here wins).",
    )


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Helm-style merge: maps merge recursively, everything else in `extra` replaces."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def split_image(image: str) -> tuple[str, str]:
    """`registry.k8s.io/jobset/jobset:v0.12.0` → (`registry.k8s.io/jobset/jobset`, `v0.12.0`)."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        raise ValueError(f"image {image!r} has no tag")
    return name, tag
