"""Checks of the queueing setup: team quotas against the pools they name, capacity, priority classes and
placement levels, each with its exact config path. Run by stack/validate.py over well-formed pools."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from decimal import Decimal

from trainer_infra.core.errors import ConfigIssue, did_you_mean
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.upstream.kueue import PRIORITY_LABEL
from trainer_infra.nodepools.labels import level_name
from trainer_infra.queues.capacity import pool_totals
from trainer_infra.queues.config import UNLABELLED_PRIORITY, QueuesConfig
from trainer_infra.queues.placement import resolve_level
from trainer_infra.queues.resolve import ResolvedQueues
from trainer_infra.teams.model import TeamConfig


def check_queues(teams: Sequence[TeamConfig], q: QueuesConfig, resolved: ResolvedQueues) -> list[ConfigIssue]:
    quotas = _quotas(teams, resolved)
    capacity = [] if quotas or q.cohort.oversubscribe else _capacity(teams, resolved)
    return quotas + capacity + _priorities(q) + _placement(q, resolved)


def _quotas(teams: Sequence[TeamConfig], resolved: ResolvedQueues) -> list[ConfigIssue]:
    issues = []
    pools = {p.name: p for p in resolved.pools}
    for i, team in enumerate(teams):
        for pool_name, quota in team.quota.items():
            qat = f"teams[{i}].quota.{pool_name}"
            pool = pools.get(pool_name)
            if pool is None:
                hint = did_you_mean(pool_name, pools) or (
                    "pools: " + ", ".join(pools) if pools else "declare nodePools"
                )
                issues.append(ConfigIssue(qat, "no node pool of this name", pool_name, hint))
                continue
            if quota.gpus and pool.node.accelerator is None:
                issues.append(ConfigIssue(f"{qat}.gpus", "pool has no accelerator", str(quota.gpus)))
            if pool.node.accelerator is None and quota.cpu is None and quota.memory is None:
                issues.append(ConfigIssue(qat, "a pool without accelerators needs cpu and/or memory quota"))
            limits = resolved.limits(team.name, pool_name)
            for res, lend in limits.lending.items():
                if lend > limits.nominal[res]:
                    nominal = format_amount(res, limits.nominal[res])
                    issues.append(
                        ConfigIssue(
                            f"{qat}.lendingLimit.{_field(res, pool.accelerator_resource)}",
                            f"lendingLimit must not exceed the nominal quota ({nominal})",
                            format_amount(res, lend),
                        )
                    )
    return issues


def _field(res: str, accelerator: str | None) -> str:
    """The `teams[].quota.<pool>` field that sets a resource: the accelerator is `gpus`."""
    return "gpus" if res == accelerator else res


def limits_without_effect(teams: Sequence[TeamConfig], q: QueuesConfig) -> list[ConfigIssue]:
    """Borrowing and lending happen between the ClusterQueues of one cohort, and every team's queue joins
    `queues.cohort`: a team alone in it has nobody to borrow from or lend to, so its limits change nothing."""
    if len(teams) != 1:
        return []
    team = teams[0]
    issues = []
    for pool, quota in team.quota.items():
        for key, limits, whom in (
            ("borrowingLimit", quota.borrowing_limit, "to borrow from"),
            ("lendingLimit", quota.lending_limit, "to lend to"),
        ):
            if limits is not None:
                found = ", ".join(f"{k}: {v}" for k, v in limits.model_dump(exclude_none=True).items()) or "{}"
                issues.append(
                    ConfigIssue(
                        f"teams[0].quota.{pool}.{key}",
                        f"has no effect: {team.name} is the only team in cohort {q.cohort.name}, so there is no "
                        f"other queue {whom}",
                        found,
                        f"remove {key}, or add the teams that share the pools",
                    )
                )
    return issues


def _capacity(teams: Sequence[TeamConfig], resolved: ResolvedQueues) -> list[ConfigIssue]:
    """Unless the cohort may oversubscribe: the teams' nominal quotas on a pool fit its capacity."""
    issues = []
    for t in pool_totals(resolved):
        over = t.over()
        pool = resolved.pools[t.index]
        if pool.accelerator_resource in over:  # derived cpu/memory follow the GPUs: one message is enough
            explicit = {r for team in teams for r in ("cpu", "memory") if getattr(team.quota.get(pool.name), r, None)}
            over = [r for r in over if r == pool.accelerator_resource or r in explicit]
        for res in over:
            by_team = ", ".join(f"{n}={format_amount(res, q[res])}" for n, q in t.by_team.items() if q[res])
            issues.append(
                ConfigIssue(
                    f"nodePools[{t.index}]",
                    f"team quotas for {res} add up to {format_amount(res, t.quota[res])}, more than the "
                    f"pool's capacity {format_amount(res, t.capacity.get(res, Decimal(0)))}"
                    + (f" ({t.nodes} nodes: its autoscaling size.max)" if pool.autoscaling else ""),
                    by_team,
                    "lower teams[].quota, grow the pool"
                    + (" (size.max)" if pool.autoscaling else "")
                    + ", or set queues.cohort.oversubscribe: true",
                )
            )
    return issues


def _priorities(q: QueuesConfig) -> list[ConfigIssue]:
    dup = sorted(n for n, c in Counter(p.name for p in q.priority_classes).items() if c > 1)
    issues = [ConfigIssue("queues.priorityClasses", "duplicate names", ", ".join(dup))] if dup else []
    if q.default_priority_class is None:
        return issues
    values = {p.name: p.value for p in q.priority_classes}
    explicit = "default_priority_class" in q.model_fields_set
    if q.default_priority_class not in values and not explicit:
        return issues  # own classes without a `normal`: nothing is called the default
    if q.default_priority_class not in values:
        issues.append(
            ConfigIssue(
                "queues.defaultPriorityClass",
                "names no class of queues.priorityClasses",
                q.default_priority_class,
                did_you_mean(q.default_priority_class, values) or "set it to one of the classes, or null",
            )
        )
    elif values[q.default_priority_class] != UNLABELLED_PRIORITY:
        issues.append(
            ConfigIssue(
                "queues.defaultPriorityClass",
                f"the default class must have value {UNLABELLED_PRIORITY}: Kueue gives a job without the "
                f"{PRIORITY_LABEL} label priority 0, whatever class is called the default",
                f"{q.default_priority_class}: {values[q.default_priority_class]}",
                f"give {q.default_priority_class} value 0 and order the other classes around it (negative values are "
                "allowed), or set defaultPriorityClass: null",
            )
        )
    return issues


def _placement(q: QueuesConfig, resolved: ResolvedQueues) -> list[ConfigIssue]:
    issues = []
    topologies = sorted({p.topology for p in resolved.pools})
    known = sorted({level_name(k) for levels in topologies for k in levels})
    policies = [("queues.placement.default", q.placement.default)] + [
        (f"queues.placement.runtimes.{name}", p) for name, p in q.placement.runtimes.items()
    ]
    for at, policy in policies:
        for mode in ("required", "preferred"):
            level = getattr(policy, mode)
            if level is None:
                continue
            if not topologies:
                issues.append(ConfigIssue(f"{at}.{mode}", "no node pool, so no topology level to place on", level))
            elif resolve_level(level, topologies) is None:
                hint = did_you_mean(level, known) or "levels present in every pool topology: " + ", ".join(
                    sorted({level_name(k) for k in set.intersection(*(set(t) for t in topologies))})
                )
                issues.append(ConfigIssue(f"{at}.{mode}", "not a level of every pool topology", level, hint))
    return issues
