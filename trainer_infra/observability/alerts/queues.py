"""Alerts on the team queues: work pending without admissions, quota saturated, heavy borrowing, a
ClusterQueue not active. Kueue gauges are read with `max by`: with several replicas only the leader reports."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.observability.alerts.model import Alert, AlertBase, Duration, Ratio, alert
from trainer_infra.observability.facts import ObservedTeam, PlatformFacts
from trainer_infra.observability.promql import regex, with_team


def _pending(cq: str) -> str:
    return f"sum by (cluster_queue) (max by (cluster_queue, status) (kueue_pending_workloads{{{cq}}}))"


def _team_cqs(facts: PlatformFacts) -> str:
    return f'cluster_queue=~"{regex([t.cluster_queue for t in facts.teams])}"'


def _reserved_and_nominal(facts: PlatformFacts) -> tuple[str, str]:
    """Each team ClusterQueue's reserved and nominal quota, by flavor and resource."""
    by = f"max by (cluster_queue, flavor, resource) ({{}}{{{{{_team_cqs(facts)}}}}})"
    return by.format("kueue_cluster_queue_resource_reservation"), by.format("kueue_cluster_queue_nominal_quota")


class PendingAlert(AlertBase):
    """Workloads pending while the team's ClusterQueue admitted nothing for `for` (per-team overrides)."""

    for_: Duration = Field(default="30m", alias="for")
    teams: dict[str, Duration] = Field(
        default_factory=dict, description="Per-team `for`, keyed by team name (unknown teams are errors)."
    )


def _workloads_pending(facts: PlatformFacts, pending: PendingAlert) -> list[dict[str, Any]]:
    def one(team: ObservedTeam, for_: str, cq: str) -> dict[str, Any]:
        return alert(
            "TrainerPlatformWorkloadsPending",
            f"{_pending(cq)} > 0\n"
            "unless on (cluster_queue)\n"
            f"(sum by (cluster_queue) (increase(kueue_admitted_workloads_total{{{cq}}}[{for_}])) > 0)",
            pending.severity,
            f"Team {team.name}: workloads pending and nothing admitted for {for_}",
            f"ClusterQueue {team.cluster_queue} has had pending workloads for {for_} without admitting "
            "any: its quota is used up, its flavors do not fit, or the queue is stuck.",
            for_,
            team=team.name,
        )

    return [
        one(t, pending.teams.get(t.name, pending.for_), f'cluster_queue="{t.cluster_queue}"')
        for t in sorted(facts.teams, key=lambda t: t.name)
    ]


WORKLOADS_PENDING = Alert("workloads_pending", "queues", PendingAlert, _workloads_pending)


class QuotaAlert(AlertBase):
    """A ClusterQueue's reserved quota at or above `ratio` of nominal while work is pending."""

    ratio: Ratio = 0.95
    for_: Duration = Field(default="30m", alias="for")


def _quota_saturated(facts: PlatformFacts, sat: QuotaAlert) -> list[dict[str, Any]]:
    if not facts.teams:
        return []
    reservation, nominal = _reserved_and_nominal(facts)
    expr = (
        f"({reservation}\n/ ({nominal} > 0)) >= {sat.ratio:g}\n"
        f"and on (cluster_queue) ({_pending(_team_cqs(facts))} > 0)"
    )
    return [
        alert(
            "TrainerPlatformQuotaSaturated",
            with_team(expr, "cluster_queue"),
            sat.severity,
            "Team {{ $labels.team }}: {{ $labels.resource }} quota saturated on {{ $labels.flavor }}",
            f"ClusterQueue {{{{ $labels.cluster_queue }}}} has reserved at least {sat.ratio:.0%} of its nominal "
            f"{{{{ $labels.resource }}}} quota on flavor {{{{ $labels.flavor }}}} while workloads wait, for "
            f"{sat.for_}.",
            sat.for_,
        )
    ]


QUOTA_SATURATED = Alert("quota_saturated", "queues", QuotaAlert, _quota_saturated)


class BorrowingAlert(AlertBase):
    """Borrowed quota (reserved above nominal) above `ratio` of nominal."""

    ratio: float = Field(default=0.5, gt=0)
    for_: Duration = Field(default="1h", alias="for")


def _borrowing(facts: PlatformFacts, bor: BorrowingAlert) -> list[dict[str, Any]]:
    if not facts.teams:
        return []
    reservation, nominal = _reserved_and_nominal(facts)
    expr = f"({reservation}\n- {nominal})\n/ ({nominal} > 0)\n> {bor.ratio:g}"
    return [
        alert(
            "TrainerPlatformBorrowingHigh",
            with_team(expr, "cluster_queue"),
            bor.severity,
            "Team {{ $labels.team }} borrows {{ $labels.resource }} heavily on {{ $labels.flavor }}",
            f"ClusterQueue {{{{ $labels.cluster_queue }}}} holds more than {bor.ratio:.0%} of its nominal "
            f"{{{{ $labels.resource }}}} quota in borrowed capacity, for {bor.for_}: these workloads are the "
            "first to be preempted when a lender reclaims.",
            bor.for_,
        )
    ]


BORROWING = Alert("borrowing", "queues", BorrowingAlert, _borrowing)


class InactiveAlert(AlertBase):
    """A team's ClusterQueue not `active` (e.g. a missing ResourceFlavor): nothing it holds is admitted."""

    for_: Duration = Field(default="10m", alias="for")


def _cluster_queue_inactive(facts: PlatformFacts, ina: InactiveAlert) -> list[dict[str, Any]]:
    if not facts.teams:
        return []
    expr = f'max by (cluster_queue) (kueue_cluster_queue_status{{{_team_cqs(facts)}, status="active"}}) == 0'
    return [
        alert(
            "TrainerPlatformClusterQueueInactive",
            with_team(expr, "cluster_queue"),
            ina.severity,
            "Team {{ $labels.team }}: ClusterQueue {{ $labels.cluster_queue }} is not active",
            f"Kueue reports ClusterQueue {{{{ $labels.cluster_queue }}}} not active for {ina.for_}; "
            "it admits nothing until it is.",
            ina.for_,
        )
    ]


CLUSTER_QUEUE_INACTIVE = Alert("cluster_queue_inactive", "queues", InactiveAlert, _cluster_queue_inactive)


class StrandedAlert(AlertBase):
    """A team ClusterQueue with an admission-check eviction (MultiKueue's, when a worker is lost) that has not
    completed for `for`: the workload keeps its quota and is never dispatched again (Kueue 0.19.2, docs/fleet.md)."""

    for_: Duration = Field(default="15m", alias="for")


#: what Kueue counts when an eviction starts (evict.go) and when it completes, the quota released
EVICTIONS_STARTED = "kueue_evicted_workloads_total"
EVICTIONS_COMPLETED = "kueue_workload_eviction_latency_seconds_count"


def _workloads_stranded(facts: PlatformFacts, st: StrandedAlert) -> list[dict[str, Any]]:
    if not facts.teams:
        return []
    cqs = f'{_team_cqs(facts)}, reason="AdmissionCheck"'
    # max by the series' own labels first (several replicas: only the leader reports), then per ClusterQueue
    by_series = "cluster_queue, underlying_cause, priority_class"
    started = f"sum by (cluster_queue) (max by ({by_series}) ({EVICTIONS_STARTED}{{{cqs}}}))"
    completed = f"sum by (cluster_queue) (max by (cluster_queue) ({EVICTIONS_COMPLETED}{{{cqs}}}))"
    # a ClusterQueue with no completed eviction yet has no such series: it counts as 0
    expr = f"{started}\n- ({completed} or {started} * 0)\n> 0"
    return [
        alert(
            "TrainerPlatformWorkloadsStranded",
            with_team(expr, "cluster_queue"),
            st.severity,
            "Team {{ $labels.team }}: {{ $value }} evicted workload(s) never released their quota",
            f"ClusterQueue {{{{ $labels.cluster_queue }}}} has had {{{{ $value }}}} admission-check eviction(s) "
            f"unfinished for {st.for_}: on a fleet's manager, jobs of a lost worker that Kueue 0.19.2 does not "
            "dispatch again while they hold the team's quota. `trainer-infra fleet redispatch` requeues them.",
            st.for_,
        )
    ]


WORKLOADS_STRANDED = Alert("workloads_stranded", "queues", StrandedAlert, _workloads_stranded)
