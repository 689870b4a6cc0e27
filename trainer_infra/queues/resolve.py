"""Pools + teams → the queueing facts, once: Topology names, flavor names and specs, every team's limits
(nominal quota, borrowing and lending limits) on every pool by team name, and the covered resources. The
ClusterQueues, the capacity check, the fleet manager and the runtimes' placement read these; none of them reads
`teams[].quota` again."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from trainer_infra.core.quantity import quantity
from trainer_infra.nodepools.labels import level_name
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.quota import PoolQuota, ResourceLimits


@dataclass(frozen=True)
class Flavor:
    name: str
    spec: dict[str, Any]


@dataclass(frozen=True)
class QueueLimits:
    """A team's limits on one pool (one flavor of its ClusterQueue), per resource: the nominal quota of
    every resource the pool offers (cpu, memory, its accelerator); a borrowing or lending limit only where
    the config sets one."""

    nominal: dict[str, Decimal]
    borrowing: dict[str, Decimal]
    lending: dict[str, Decimal]

    def map(self, fn: Callable[[str, Decimal], Decimal]) -> QueueLimits:
        """Every amount as `fn(resource, amount)`: the fleet manager zeroes a draining worker's, caps the rest."""

        def each(table: dict[str, Decimal]) -> dict[str, Decimal]:
            return {res: fn(res, amount) for res, amount in table.items()}

        return QueueLimits(each(self.nominal), each(self.borrowing), each(self.lending))


@dataclass(frozen=True)
class ResolvedQueues:
    pools: tuple[ResolvedPool, ...]
    topologies: dict[tuple[str, ...], str]  # levels → Topology name; empty with TAS off
    flavors: dict[str, Flavor]  # pool name → its ResourceFlavor
    teams: dict[str, dict[str, QueueLimits]]  # team name → pool name → the team's limits there
    covered: list[str]

    def limits(self, team: str, pool: str) -> QueueLimits:
        return self.teams[team][pool]


def covered_resources(resources: Iterable[str]) -> list[str]:
    """cpu, memory, then every other resource among `resources` (accelerators, EFA interfaces): one resource group,
    since Kueue lets a resource appear in only one group; a pool without some resource gets quota 0 for it. A pod
    requesting a resource its ClusterQueue does not cover is never admitted (Kueue 0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go `findFlavorForPodSets`: "resource ... unavailable in
    ClusterQueue"). `resources` may be other covered lists (the fleet manager covers what its workers cover)."""
    return ["cpu", "memory", *sorted(set(resources) - {"cpu", "memory"})]


def topology_names(pools: Sequence[ResolvedPool]) -> dict[tuple[str, ...], str]:
    """A readable name per distinct level list (`block-rack-hostname`), hashed only on collision."""
    by_name: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for levels in {p.topology for p in pools}:
        name = re.sub(r"[^a-z0-9]+", "-", "-".join(level_name(k) for k in levels).lower()).strip("-")
        by_name[name[:200] or "topology"].add(levels)
    out = {}
    for name, variants in by_name.items():
        for levels in variants:
            suffix = "-" + hashlib.sha256("\n".join(levels).encode()).hexdigest()[:8] if len(variants) > 1 else ""
            out[levels] = name + suffix
    return out


def _nominal(quota: PoolQuota | None, pool: ResolvedPool) -> dict[str, Decimal]:
    """The team's nominal quota on a pool per resource; cpu/memory default to the node's share per GPU."""
    quota = quota or PoolQuota()
    acc = pool.node.accelerator
    out: dict[str, Decimal] = {}
    for res in ("cpu", "memory"):
        given = getattr(quota, res)
        if given is not None:
            out[res] = quantity(given)
        else:
            share = pool.per_node[res] * quota.gpus / acc.count if acc else Decimal(0)
            # Round down (whole bytes, millicores): shares then never add up to more than the node has.
            out[res] = share.quantize(Decimal(1) if res == "memory" else Decimal("0.001"), rounding=ROUND_FLOOR)
    if acc:
        out[acc.resource] = Decimal(quota.gpus)
    for res in pool.per_node:
        if res not in ("cpu", "memory") and res != pool.accelerator_resource:
            out[res] = _per_gpu(pool, res, quota.gpus)
    return out


def _per_gpu(pool: ResolvedPool, res: str, gpus: int) -> Decimal:
    """An extended resource of the pool's nodes (EFA interfaces) in proportion to `gpus`, rounded down: a job
    holding a node's GPUs may use its interfaces too, and shares never add up to more than the nodes have."""
    acc = pool.node.accelerator
    if acc is None:
        return Decimal(0)
    return (pool.per_node[res] * gpus / acc.count).to_integral_value(rounding=ROUND_FLOOR)


def _limit(limits: ResourceLimits, res: str, pool: ResolvedPool) -> Decimal | None:
    if res == pool.accelerator_resource:
        return None if limits.gpus is None else Decimal(limits.gpus)
    if res not in ("cpu", "memory"):  # extended resources follow the GPU limit
        return None if limits.gpus is None else _per_gpu(pool, res, limits.gpus)
    value = getattr(limits, res, None)
    return None if value is None else quantity(value)


def queue_limits(quota: PoolQuota | None, pool: ResolvedPool) -> QueueLimits:
    """A team's nominal quota on a pool and the borrowing/lending limits it sets there."""
    amounts = _nominal(quota, pool)

    def limited(limits: ResourceLimits | None) -> dict[str, Decimal]:
        if limits is None:
            return {}
        found = ((res, _limit(limits, res, pool)) for res in amounts)
        return {res: value for res, value in found if value is not None}

    if quota is None:
        return QueueLimits(amounts, {}, {})
    return QueueLimits(amounts, limited(quota.borrowing_limit), limited(quota.lending_limit))


def flavor(pool: ResolvedPool, topology: str | None) -> Flavor:
    """Named `<pool>-<hash of the immutable fields>`. A change of those fields makes a new flavor that the
    queues switch to, and the old one is deleted afterwards. Replacing in place under one name would
    deadlock: Kueue's `resource-in-use` finalizer holds the delete while ClusterQueues still name it."""
    spec: dict[str, Any] = {"nodeLabels": pool.flavor_labels}
    if pool.taints:
        spec["tolerations"] = pool.tolerations
    if topology:
        spec["topologyName"] = topology
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    return Flavor(f"{pool.name}-{digest}", spec)


def resolve_queues(pools: tuple[ResolvedPool, ...], teams: Sequence[TeamConfig], tas: bool) -> ResolvedQueues:
    topologies = topology_names(pools) if tas else {}
    by_name = {p.name: p for p in pools}
    return ResolvedQueues(
        pools=pools,
        topologies=topologies,
        flavors={p.name: flavor(p, topologies.get(p.topology)) for p in pools},
        teams={
            team.name: {p.name: queue_limits(team.quota.get(p.name), p) for p in by_name.values()} for team in teams
        },
        covered=covered_resources(res for p in pools for res in p.per_node),
    )
