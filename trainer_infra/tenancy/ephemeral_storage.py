"""How much of a node's disk a team's containers may fill (`tenancy.ephemeralStorage`).

A container's writable layer, its logs and its disk-backed emptyDirs live on the node's disk; a full disk makes
the kubelet evict every pod on the node, other teams' included. Each container therefore gets a default request
and limit (a LimitRange, so the namespace's ResourceQuota can count `requests.ephemeral-storage`) and a maximum a
member cannot raise; the kubelet evicts a pod that writes past its limit, and only that pod. Kueue does not charge
it (`components/kueue.py` excludes the resource): node disk is bounded per pod here, not shared out per team.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from trainer_infra.core.model import StrictModel
from trainer_infra.core.quantity import quantity
from trainer_infra.core.types import PositiveQuantity
from trainer_infra.core.upstream import kubernetes

RESOURCE = kubernetes.EPHEMERAL_STORAGE
#: The least a container gets: the SDK's `pip install --user` into HOME and the Hugging Face caches need room.
FLOOR = "256Mi"


class EphemeralStorageConfig(StrictModel):
    """Per-container bounds on node disk (writable layer, logs, disk-backed emptyDirs) in every team namespace,
    merged into the team's LimitRange (`teams[].limitRange` wins for a key it sets itself)."""

    enabled: bool = True
    default_request: PositiveQuantity = Field(default="1Gi", description="Request of a container that sets none.")
    default_limit: PositiveQuantity = Field(default="50Gi", description="Limit of a container that sets none.")
    max: PositiveQuantity = Field(default="200Gi", description="The most a container may set as its limit.")

    @model_validator(mode="after")
    def _ordered(self) -> EphemeralStorageConfig:
        request, limit, most = (quantity(v) for v in (self.default_request, self.default_limit, self.max))
        if limit < quantity(FLOOR):
            raise ValueError(
                f"defaultLimit {self.default_limit} is below {FLOOR}: the runtimes' pip installs and caches need room"
            )
        if not request <= limit <= most:
            raise ValueError(
                f"expected defaultRequest <= defaultLimit <= max, found {self.default_request}, "
                f"{self.default_limit}, {self.max}"
            )
        return self

    def limit_range(self) -> dict[str, dict[str, str]]:
        """The LimitRange keys (`default`, `defaultRequest`, `max`) this bound adds, empty when off."""
        if not self.enabled:
            return {}
        return {
            "default": {RESOURCE: self.default_limit},
            "defaultRequest": {RESOURCE: self.default_request},
            "max": {RESOURCE: self.max},
        }
