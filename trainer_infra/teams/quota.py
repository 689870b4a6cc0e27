"""A team's nominal Kueue quota per node pool (`teams[].quota.<pool>`), and its borrowing/lending limits."""

from __future__ import annotations

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import NonNegativeQuantity


class ResourceLimits(StrictModel):
    """A limit per resource; a resource left out has no limit."""

    gpus: int | None = Field(default=None, ge=0, description="Accelerators (the pool's accelerator resource).")
    cpu: NonNegativeQuantity | None = None
    memory: NonNegativeQuantity | None = None


class PoolQuota(StrictModel):
    """A team's nominal quota on one pool (= one ResourceFlavor)."""

    gpus: int = Field(default=0, ge=0, description="Accelerators guaranteed to the team.")
    cpu: NonNegativeQuantity | None = Field(default=None, description="Default: the node's cpu per accelerator × gpus.")
    memory: NonNegativeQuantity | None = Field(
        default=None, description="Default: the node's memory per accelerator × gpus."
    )
    borrowing_limit: ResourceLimits | None = Field(default=None, description="Most it may borrow from the cohort.")
    lending_limit: ResourceLimits | None = Field(default=None, description="Most of its quota others may borrow.")
