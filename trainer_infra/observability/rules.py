"""Prometheus rule groups for the platform: the team info series, then every registered alert
(`alerts/registry.py`) in a group per concern.

Every metric and label used here is exported by the pinned controllers (versions/matrix.yaml; Trainer's
through controller-runtime), by Prometheus itself (`up`), by kube-state-metrics (node alerts), or recorded by
the `trainer-platform.teams` group below; the e2e suite scrapes the real controllers and fails on any name
that does not exist.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from trainer_infra.observability.alerts.registry import ALERTS
from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.promql import TEAM_INFO


def team_info_rules(facts: PlatformFacts) -> list[dict[str, Any]]:
    """One constant series per team mapping team ↔ ClusterQueue ↔ namespace (alerts and dashboards join it)."""
    rules = []
    for team in sorted(facts.teams, key=lambda t: t.name):
        expr = "vector(1)"
        for label, value in (("team", team.name), ("cluster_queue", team.cluster_queue), ("namespace", team.namespace)):
            expr = f'label_replace({expr}, "{label}", "{value}", "", "")'
        rules.append({"record": TEAM_INFO, "expr": expr})
    return rules


def rule_groups(facts: PlatformFacts, alerts: BaseModel) -> list[dict[str, Any]]:
    """The PrometheusRule `spec.groups`: groups in the order the registry first names them; empty ones left out."""
    groups: dict[str, list[dict[str, Any]]] = {"teams": team_info_rules(facts)}
    for entry in ALERTS:
        groups.setdefault(entry.group, []).extend(entry.render(facts, alerts))
    return [{"name": f"trainer-platform.{name}", "rules": rules} for name, rules in groups.items() if rules]
