"""JobSet: the controller Trainer turns every TrainJob into. Config and chart values live together."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from trainer_infra.config.images import mirror_image
from trainer_infra.controllers.common import ControllerConfig, deep_merge, split_image


class JobSetConfig(ControllerConfig):
    """JobSet controller (chart `jobset`). Installed by us, never by the Trainer chart's subchart."""

    @field_validator("feature_gates")
    @classmethod
    def _no_gates(cls, gates: dict[str, bool]) -> dict[str, bool]:
        if gates:
            raise ValueError(
                "the JobSet chart has no featureGates value "
                "(pass controller flags through `values` if you really need one)"
            )
        return gates


def jobset_values(cfg: JobSetConfig, version: str, mirror: str | None) -> dict[str, Any]:
    repo, tag = split_image(mirror_image(f"registry.k8s.io/jobset/jobset:v{version}", mirror))
    values: dict[str, Any] = {
        "image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
        "controller": {"replicas": cfg.replicas, "resources": cfg.resources.as_k8s()},
    }
    return deep_merge(values, cfg.values)
