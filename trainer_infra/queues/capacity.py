"""Capacity arithmetic: what each pool offers against the sum of the teams' nominal quotas on it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from trainer_infra.nodepools.labels import format_quantity
from trainer_infra.queues.derive import nominal

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig


@dataclass(frozen=True)
class PoolTotals:
    pool: str
    index: int
    nodes: int
    capacity: dict[str, Decimal]
    quota: dict[str, Decimal]  # sum of nominal quotas over teams
    by_team: dict[str, dict[str, Decimal]]

    def over(self) -> list[str]:
        return [res for res, total in self.quota.items() if total > self.capacity.get(res, Decimal(0))]


def pool_totals(cfg: StackConfig) -> list[PoolTotals]:
    out = []
    for index, pool in enumerate(cfg.node_pools):
        capacity = pool.capacity()
        by_team = {t.name: nominal(t.quota[pool.name], pool) for t in cfg.teams if pool.name in t.quota}
        quota = {res: sum((q[res] for q in by_team.values()), Decimal(0)) for res in capacity}
        out.append(PoolTotals(pool.name, index, pool.node_count, capacity, quota, by_team))
    return out


def _fmt(res: str, value: Decimal) -> str:
    return format_quantity(value, binary=res == "memory")


def capacity_lines(cfg: StackConfig) -> list[str]:
    """One line per pool for `trainer-infra validate`: capacity and the teams' total nominal quota."""
    lines = []
    for t in pool_totals(cfg):
        parts = [f"{res} {_fmt(res, t.quota[res])}/{_fmt(res, cap)}" for res, cap in sorted(t.capacity.items())]
        lines.append(f"pool {t.pool}: {t.nodes} nodes; team quota/capacity: " + ", ".join(parts))
    if cfg.teams:
        lines.append(
            f"queues: {len(cfg.teams)} ClusterQueues in cohort {cfg.queues.cohort.name}"
            + (" (oversubscription allowed)" if cfg.queues.cohort.oversubscribe else "")
        )
    return lines
