"""Resolved node pools → the objects and provider resources each backend owns (see the backend modules for
what they never touch)."""

from __future__ import annotations

from dataclasses import replace

from trainer_infra.core.cloud import CloudResource
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject, PlanPart
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS


def node_pool_plan(
    pools: tuple[ResolvedPool, ...], mirror: str | None, cloud: StrictModel, allow_data_loss: bool = False
) -> PlanPart:
    """`cloud` is the stack's `cloud:` block: each cloud backend's resources get their cluster's part of it. Node
    groups are protected like every object holding user work (docs/data-safety.md) unless `allow_data_loss`."""
    objects: list[ManagedObject] = []
    resources: list[CloudResource] = []
    for backend in BACKENDS:
        objects += backend.shared_objects([p for p in pools if p.config.backend == backend.name], mirror)
    for pool in pools:
        objects += BACKENDS[pool.config.backend].objects(pool)
        resources += BACKENDS[pool.config.backend].resources(pool, getattr(cloud, pool.config.backend, None))
    if allow_data_loss:
        resources = [replace(r, options=replace(r.options, protect=False)) for r in resources]
    return PlanPart(objects=tuple(objects), resources=tuple(resources))
