"""Node pools → ResolvedPool facts, once per validation: taints (the pool's and its backend's), topology,
node count, capacity, node labels and the labels its ResourceFlavor selects on."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.nodepools.labels import CAPACITY_TYPE_LABEL, POOL_LABEL
from trainer_infra.nodepools.model import NodePool, ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS


def resolve_pool(pool: NodePool, index: int) -> ResolvedPool:
    backend = BACKENDS[pool.backend]
    settings = pool.settings
    taints = pool.configured_taints
    taints += [t for t in backend.extra_taints() if t not in taints]
    selector = backend.selector(settings)
    labels = {**pool.labels, POOL_LABEL: pool.name, CAPACITY_TYPE_LABEL: pool.capacity_type}
    acc = pool.node.accelerator
    if acc and acc.product and acc.product_label_key:
        labels[acc.product_label_key] = acc.product
    labels.update(selector)
    return ResolvedPool(
        config=pool,
        index=index,
        taints=tuple(taints),
        topology=tuple(pool.topology) if pool.topology is not None else backend.default_topology(),
        node_count=backend.node_count(pool, settings),
        per_node=pool.per_node(),
        node_labels=dict(sorted(labels.items())),
        flavor_labels=dict(sorted(selector.items())) if selector else {POOL_LABEL: pool.name},
    )


def resolve_pools(pools: Sequence[NodePool]) -> tuple[ResolvedPool, ...]:
    return tuple(resolve_pool(p, i) for i, p in enumerate(pools))
