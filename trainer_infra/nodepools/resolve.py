"""Node pools → ResolvedPool facts, once per validation: the node shape (declared, or the backend's machine
table), taints (the pool's and its backend's), topology, node count, capacity, node labels, the labels its
ResourceFlavor selects on, and the disk the backend renders per node."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.nodepools.disk import node_disk
from trainer_infra.nodepools.labels import CAPACITY_TYPE_LABEL, POOL_LABEL
from trainer_infra.nodepools.model import NodePool, NodeShape, ResolvedPool, per_node
from trainer_infra.nodepools.registry import BACKENDS


def pool_shape(pool: NodePool, index: int) -> NodeShape:
    """The declared shape where the pool gives one (checked against the backend's in nodepools/checks.py), else
    the backend's; a pool with neither cannot be counted at all."""
    shape = pool.node or BACKENDS[pool.backend].shape(pool, pool.settings)
    if shape is None:
        hint = "declare node: {cpu, memory, accelerator: {count, product}} (what one node offers to pods)"
        raise ConfigError([ConfigIssue(f"nodePools[{index}].node", "required key is missing", None, hint)])
    return shape


def resolve_pool(pool: NodePool, index: int, container_disk: str) -> ResolvedPool:
    """`container_disk` is the most ephemeral storage a member's container may ask for
    (`tenancy.ephemeralStorage.max`): the disk the backend renders is sized for it."""
    backend = BACKENDS[pool.backend]
    settings = pool.settings
    rule = backend.disk_rule(pool, settings) if settings is not None else None
    node = pool_shape(pool, index)
    taints = pool.configured_taints(node)
    taints += [t for t in backend.extra_taints() if t not in taints]
    selector = backend.selector(settings)
    labels = {**pool.labels, POOL_LABEL: pool.name, CAPACITY_TYPE_LABEL: pool.capacity_type}
    acc = node.accelerator
    if acc and acc.product and acc.product_label_key:
        labels[acc.product_label_key] = acc.product
    labels.update(selector)
    return ResolvedPool(
        config=pool,
        index=index,
        node=node,
        taints=tuple(taints),
        topology=tuple(pool.topology) if pool.topology is not None else backend.default_topology(pool, settings),
        node_count=backend.node_count(pool, settings),
        per_node=per_node(node, backend.extra_resources(pool, settings)),
        node_labels=dict(sorted(labels.items())),
        flavor_labels=dict(sorted(selector.items())) if selector else {POOL_LABEL: pool.name},
        autoscaling=backend.autoscaling(pool, settings),
        provisioning=backend.provisioning(pool, settings),
        disk=node_disk(rule, container_disk, pool.disk) if rule is not None else None,
    )


def resolve_pools(pools: Sequence[NodePool], container_disk: str) -> tuple[ResolvedPool, ...]:
    return tuple(resolve_pool(p, i, container_disk) for i, p in enumerate(pools))
