"""What the controller components share: their config model and the chart-values merge."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.core.images import mirror_image
from trainer_infra.core.model import Resources, StrictModel
from trainer_infra.core.types import DnsLabel, SemVer
from trainer_infra.core.upstream import kubernetes


def default_resources() -> Resources:
    # Requests so controllers are never BestEffort (first evicted under pressure); a memory limit
    # only, as CPU limits throttle webhooks into timeouts.
    return Resources(requests={"cpu": "100m", "memory": "256Mi"}, limits={"memory": "1Gi"})


class ControllerConfig(StrictModel):
    """Settings every controller has. `version` and `namespace` default from the compatibility matrix."""

    install: bool = Field(
        default=True,
        description="Install the component's chart. false: the cluster already runs it (e.g. installed by a "
        "platform team): no chart, controller or namespace is created, changed or deleted here; the stack waits "
        "for its API to answer and manages every other object. It must run `version` in `namespace`, configured "
        "as `trainer-infra render` with `install: true` shows (docs/versions.md).",
    )
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


PROBE_NAME = "trainer-platform-webhook-probe"


def probe_pod(mirror: str | None) -> dict[str, Any]:
    """The pod of a webhook probe object: never runs (dry-run only), but must pass validation."""
    image = mirror_image(kubernetes.PAUSE_IMAGE, mirror)
    return {"restartPolicy": "Never", "containers": [{"name": "probe", "image": image}]}
