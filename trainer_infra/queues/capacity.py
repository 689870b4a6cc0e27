"""Capacity arithmetic: what each pool offers against the sum of the teams' nominal quotas on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from trainer_infra.core.quantity import format_amount
from trainer_infra.queues.config import QueuesConfig
from trainer_infra.queues.resolve import ResolvedQueues
from trainer_infra.teams.model import TeamConfig


@dataclass(frozen=True)
class PoolTotals:
    pool: str
    index: int
    nodes: int
    capacity: dict[str, Decimal]
    quota: dict[str, Decimal]  # sum of nominal quotas over teams
    by_team: dict[str, dict[str, Decimal]]  # team name → its nominal quota on the pool

    def over(self) -> list[str]:
        return [res for res, total in self.quota.items() if total > self.capacity.get(res, Decimal(0))]


def pool_totals(resolved: ResolvedQueues) -> list[PoolTotals]:
    out = []
    for pool in resolved.pools:
        capacity = pool.capacity
        by_team = {team: limits[pool.name].nominal for team, limits in resolved.teams.items()}
        quota = {res: sum((q[res] for q in by_team.values()), Decimal(0)) for res in capacity}
        out.append(PoolTotals(pool.name, pool.index, pool.node_count, capacity, quota, by_team))
    return out


def capacity_lines(teams: Sequence[TeamConfig], queues: QueuesConfig, resolved: ResolvedQueues) -> list[str]:
    """One line per pool for `trainer-infra validate`: capacity and the teams' total nominal quota."""
    lines = []
    for t in pool_totals(resolved):
        parts = [
            f"{res} {format_amount(res, t.quota[res])}/{format_amount(res, cap)}"
            for res, cap in sorted(t.capacity.items())
        ]
        pool = resolved.pools[t.index]
        nodes = f"{t.nodes} nodes"
        if pool.autoscaling is not None:  # quotas count what the pool can reach, not what runs now
            low, high = pool.autoscaling
            nodes = f"up to {t.nodes} nodes (autoscaling {low}..{high}, quotas count the max)"
        if pool.provisioning is not None:
            nodes += f", provisioned on request ({pool.provisioning.provisioning_class})"
        lines.append(f"pool {t.pool}: {nodes}; team quota/capacity: " + ", ".join(parts))
    if teams:
        lines.append(
            f"queues: {len(teams)} ClusterQueues in cohort {queues.cohort.name}"
            + (" (oversubscription allowed)" if queues.cohort.oversubscribe else "")
        )
    return lines
