"""Prometheus rule groups for the platform: controllers, webhooks, team queues, TrainJobs, pool nodes.

Every metric and label used here is exported by the pinned controllers (versions/matrix.yaml; Trainer's
through controller-runtime), by Prometheus itself (`up`), by kube-state-metrics
(node alerts), or recorded by the `trainer-platform.teams` group below; the e2e suite scrapes the
real controllers and fails on any name that does not exist. Kueue gauges are read with `max by`
because with several replicas only the leader reports them.
"""

from __future__ import annotations

import re
from typing import Any

from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.settings import Alerts

TEAM_INFO = "trainer_platform_team_info"
RUNBOOK = "docs/observability.md#{anchor}"


def ksm_label(key: str) -> str:
    """kube-state-metrics' name for a Kubernetes label key (`a.b/c-d` → `label_a_b_c_d`)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _regex(values: list[str] | tuple[str, ...]) -> str:
    """An RE2 alternation of Kubernetes names inside a PromQL string (only `.` needs escaping there)."""
    return "|".join(v.replace(".", "\\\\.") for v in sorted(values))


def _alert(name: str, expr: str, severity: str, summary: str, description: str, for_: str | None) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, "platform": "trainer-platform"}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook": RUNBOOK.format(anchor=name.lower()),
    }
    return rule


def _with_team(expr: str, on: str) -> str:
    """Attach the `team` label by joining the team info series on `on` (cluster_queue or namespace)."""
    return f"({expr})\n* on ({on}) group_left (team) {TEAM_INFO}"


def team_info_rules(facts: PlatformFacts) -> list[dict[str, Any]]:
    """One constant series per team mapping team ↔ ClusterQueue ↔ namespace (alerts and dashboards join it)."""
    rules = []
    for team in sorted(facts.teams, key=lambda t: t.name):
        expr = "vector(1)"
        for label, value in (("team", team.name), ("cluster_queue", team.cluster_queue), ("namespace", team.namespace)):
            expr = f'label_replace({expr}, "{label}", "{value}", "", "")'
        rules.append({"record": TEAM_INFO, "expr": expr})
    return rules


def controller_rules(facts: PlatformFacts, alerts: Alerts) -> list[dict[str, Any]]:
    jobs = f'job=~"{_regex([e.service for e in facts.endpoints])}"'
    rules: list[dict[str, Any]] = []
    down = alerts.controller_down
    if down.enabled:
        for e in sorted(facts.endpoints, key=lambda e: e.component):
            target = f'job="{e.service}", namespace="{e.namespace}"'
            rule = _alert(
                "TrainerPlatformControllerDown",
                # absent(): no target at all (no Ready pod behind the Service); == 0: scrapes fail
                f"max by (namespace, job) (up{{{target}}}) == 0 or absent(up{{{target}}})",
                down.severity,
                f"The {e.component} controller has no healthy metrics target",
                f"No Ready {e.component} pod in {e.namespace} answered a scrape for {down.for_}: its webhooks "
                "and reconciliation are down or degraded.",
                down.for_,
            )
            rule["labels"]["component"] = e.component
            rules.append(rule)
    rec = alerts.reconcile_errors
    if rec.enabled:
        by = "namespace, job, controller"
        rules.append(
            _alert(
                "TrainerPlatformReconcileErrors",
                f"sum by ({by}) (rate(controller_runtime_reconcile_errors_total{{{jobs}}}[{rec.window}]))\n"
                f"/ sum by ({by}) (rate(controller_runtime_reconcile_total{{{jobs}}}[{rec.window}]))\n"
                f"> {rec.ratio:g}",
                rec.severity,
                "Controller {{ $labels.controller }} ({{ $labels.job }}) fails reconciles",
                f"More than {rec.ratio:.0%} of reconciles of {{{{ $labels.controller }}}} returned an error "
                f"over {rec.window}, for {rec.for_}.",
                rec.for_,
            )
        )
    wh = alerts.webhook_errors
    if wh.enabled:
        by = "namespace, job, webhook"
        rules.append(
            _alert(
                "TrainerPlatformWebhookErrors",
                f'sum by ({by}) (rate(controller_runtime_webhook_requests_total{{{jobs}, code!="200"}}[{wh.window}]))\n'
                f"/ sum by ({by}) (rate(controller_runtime_webhook_requests_total{{{jobs}}}[{wh.window}]))\n"
                f"> {wh.ratio:g}",
                wh.severity,
                "Webhook {{ $labels.webhook }} ({{ $labels.job }}) answers with HTTP errors",
                f"More than {wh.ratio:.0%} of admission requests to {{{{ $labels.webhook }}}} failed over "
                f"{wh.window}, for {wh.for_}: creates and updates of its objects fail or bypass validation.",
                wh.for_,
            )
        )
    lat = alerts.webhook_latency
    if lat.enabled:
        rules.append(
            _alert(
                "TrainerPlatformWebhookSlow",
                "histogram_quantile(0.99, sum by (namespace, job, webhook, le) "
                f"(rate(controller_runtime_webhook_latency_seconds_bucket{{{jobs}}}[{lat.window}])))\n"
                f"> {lat.seconds:g}",
                lat.severity,
                "Webhook {{ $labels.webhook }} ({{ $labels.job }}) is slow",
                f"p99 admission latency above {lat.seconds:g}s over {lat.window}, for {lat.for_}; the API server "
                "times out webhook calls after the configuration's timeoutSeconds (at most 30s).",
                lat.for_,
            )
        )
    return rules


def _pending(cq: str) -> str:
    return f"sum by (cluster_queue) (max by (cluster_queue, status) (kueue_pending_workloads{{{cq}}}))"


def _quota(metric: str, cq: str) -> str:
    return f"max by (cluster_queue, flavor, resource) ({metric}{{{cq}}})"


def queue_rules(facts: PlatformFacts, alerts: Alerts) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    if not facts.teams:
        return rules
    team_cqs = f'cluster_queue=~"{_regex([t.cluster_queue for t in facts.teams])}"'
    pending = alerts.workloads_pending
    if pending.enabled:
        for team in sorted(facts.teams, key=lambda t: t.name):
            for_ = pending.teams.get(team.name, pending.for_)
            cq = f'cluster_queue="{team.cluster_queue}"'
            expr = (
                f"{_pending(cq)} > 0\n"
                "unless on (cluster_queue)\n"
                f"(sum by (cluster_queue) (increase(kueue_admitted_workloads_total{{{cq}}}[{for_}])) > 0)"
            )
            rule = _alert(
                "TrainerPlatformWorkloadsPending",
                expr,
                pending.severity,
                f"Team {team.name}: workloads pending and nothing admitted for {for_}",
                f"ClusterQueue {team.cluster_queue} has had pending workloads for {for_} without admitting "
                "any: its quota is used up, its flavors do not fit, or the queue is stuck.",
                for_,
            )
            rule["labels"]["team"] = team.name
            rules.append(rule)
    reservation = _quota("kueue_cluster_queue_resource_reservation", team_cqs)
    nominal = _quota("kueue_cluster_queue_nominal_quota", team_cqs)
    sat = alerts.quota_saturated
    if sat.enabled:
        expr = f"({reservation}\n/ ({nominal} > 0)) >= {sat.ratio:g}\nand on (cluster_queue) ({_pending(team_cqs)} > 0)"
        rules.append(
            _alert(
                "TrainerPlatformQuotaSaturated",
                _with_team(expr, "cluster_queue"),
                sat.severity,
                "Team {{ $labels.team }}: {{ $labels.resource }} quota saturated on {{ $labels.flavor }}",
                f"ClusterQueue {{{{ $labels.cluster_queue }}}} has reserved at least {sat.ratio:.0%} of its nominal "
                f"{{{{ $labels.resource }}}} quota on flavor {{{{ $labels.flavor }}}} while workloads wait, for "
                f"{sat.for_}.",
                sat.for_,
            )
        )
    bor = alerts.borrowing
    if bor.enabled:
        expr = f"({reservation}\n- {nominal})\n/ ({nominal} > 0)\n> {bor.ratio:g}"
        rules.append(
            _alert(
                "TrainerPlatformBorrowingHigh",
                _with_team(expr, "cluster_queue"),
                bor.severity,
                "Team {{ $labels.team }} borrows {{ $labels.resource }} heavily on {{ $labels.flavor }}",
                f"ClusterQueue {{{{ $labels.cluster_queue }}}} holds more than {bor.ratio:.0%} of its nominal "
                f"{{{{ $labels.resource }}}} quota in borrowed capacity, for {bor.for_}: these workloads are the "
                "first to be preempted when a lender reclaims.",
                bor.for_,
            )
        )
    ina = alerts.cluster_queue_inactive
    if ina.enabled:
        expr = f'max by (cluster_queue) (kueue_cluster_queue_status{{{team_cqs}, status="active"}}) == 0'
        rules.append(
            _alert(
                "TrainerPlatformClusterQueueInactive",
                _with_team(expr, "cluster_queue"),
                ina.severity,
                "Team {{ $labels.team }}: ClusterQueue {{ $labels.cluster_queue }} is not active",
                f"Kueue reports ClusterQueue {{{{ $labels.cluster_queue }}}} not active for {ina.for_}; "
                "it admits nothing until it is.",
                ina.for_,
            )
        )
    return rules


def trainjob_rules(facts: PlatformFacts, alerts: Alerts) -> list[dict[str, Any]]:
    fail = alerts.train_job_failures
    if not fail.enabled or not facts.teams:
        return []
    ns = f'namespace=~"{_regex([t.namespace for t in facts.teams])}"'
    metric = f"jobset_failed_total{{{ns}}}"
    # A failed JobSet adds a new series (one per JobSet name) starting at 1, which increase() cannot
    # see: count series that appeared within the window, plus older ones that went up.
    expr = (
        f"count by (namespace) (\n  ({metric} unless {metric} offset {fail.window})\n"
        f"  or (increase({metric}[{fail.window}]) > 0)\n) >= {fail.count}"
    )
    return [
        _alert(
            "TrainerPlatformTrainJobsFailing",
            _with_team(expr, "namespace"),
            fail.severity,
            "Team {{ $labels.team }}: {{ $value }} TrainJobs failed within " + fail.window,
            f"At least {fail.count} JobSets (one per TrainJob) in namespace {{{{ $labels.namespace }}}} "
            f"failed within {fail.window}.",
            None,
        )
    ]


def node_rules(facts: PlatformFacts, alerts: Alerts) -> list[dict[str, Any]]:
    nodes = alerts.pool_nodes_not_ready
    if not nodes.enabled or not facts.pools:
        return []
    label = ksm_label(facts.pool_label)
    expr = (
        "count by (pool) (\n  label_replace(\n"
        '    (max by (node) (kube_node_status_condition{condition="Ready", status="true"}) == 0)\n'
        f"    * on (node) group_left ({label})\n"
        f'    max by (node, {label}) (kube_node_labels{{{label}=~"{_regex(facts.pools)}"}}),\n'
        f'    "pool", "$1", "{label}", "(.*)"\n  )\n) >= {nodes.count}'
    )
    return [
        _alert(
            "TrainerPlatformPoolNodesNotReady",
            expr,
            nodes.severity,
            "{{ $value }} nodes of pool {{ $labels.pool }} are NotReady",
            f"At least {nodes.count} nodes of node pool {{{{ $labels.pool }}}} have not been Ready for "
            f"{nodes.for_}: Kueue still counts their capacity in the pool's quota.",
            nodes.for_,
        )
    ]


def rule_groups(facts: PlatformFacts, alerts: Alerts) -> list[dict[str, Any]]:
    """The PrometheusRule `spec.groups`, in a fixed order; empty groups are left out."""
    groups = [
        ("trainer-platform.teams", team_info_rules(facts)),
        ("trainer-platform.controllers", controller_rules(facts, alerts)),
        ("trainer-platform.queues", queue_rules(facts, alerts)),
        ("trainer-platform.trainjobs", trainjob_rules(facts, alerts)),
        ("trainer-platform.nodes", node_rules(facts, alerts)),
    ]
    return [{"name": name, "rules": rules} for name, rules in groups if rules]
