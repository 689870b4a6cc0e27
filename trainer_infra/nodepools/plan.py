"""Node pools → the objects each backend owns (see the backend modules for what they never touch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_infra.nodepools.karpenter import karpenter_objects
from trainer_infra.nodepools.kwok import kwok_controller, kwok_nodes
from trainer_infra.nodepools.static import static_node_patches
from trainer_infra.plan.model import ManagedObject

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig


def node_pool_objects(cfg: StackConfig) -> list[ManagedObject]:
    objects: list[ManagedObject] = []
    if any(p.backend == "kwok" for p in cfg.node_pools):
        objects += kwok_controller(cfg.images.registry_mirror)
    for pool in cfg.node_pools:
        if pool.backend == "kwok":
            objects += kwok_nodes(pool)
        elif pool.backend == "static":
            objects += static_node_patches(pool)
        else:
            objects += karpenter_objects(pool)
    return objects
