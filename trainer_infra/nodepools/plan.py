"""Resolved node pools → the objects and provider resources each backend owns (see the backend modules for
what they never touch)."""

from __future__ import annotations

from trainer_infra.core.objects import ManagedObject, PlanPart, ProviderResource
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS


def node_pool_plan(pools: tuple[ResolvedPool, ...], mirror: str | None) -> PlanPart:
    objects: list[ManagedObject] = []
    resources: list[ProviderResource] = []
    for backend in BACKENDS:
        objects += backend.shared_objects([p for p in pools if p.config.backend == backend.name], mirror)
    for pool in pools:
        objects += BACKENDS[pool.config.backend].objects(pool)
        resources += BACKENDS[pool.config.backend].resources(pool)
    return PlanPart(objects=tuple(objects), resources=tuple(resources))
