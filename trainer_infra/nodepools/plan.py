"""Resolved node pools → the objects each backend owns (see the backend modules for what they never touch)."""

from __future__ import annotations

from trainer_infra.core.objects import ManagedObject
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS


def node_pool_objects(pools: tuple[ResolvedPool, ...], mirror: str | None) -> list[ManagedObject]:
    objects: list[ManagedObject] = []
    for backend in BACKENDS:
        objects += backend.shared_objects([p for p in pools if p.config.backend == backend.name], mirror)
    for pool in pools:
        objects += BACKENDS[pool.config.backend].objects(pool)
    return objects
