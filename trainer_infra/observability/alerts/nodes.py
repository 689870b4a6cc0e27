"""Alerts on pool nodes, from kube-state-metrics (see README: it must be installed)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.observability.alerts.model import Alert, AlertBase, Duration, Severity, alert
from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.promql import ksm_label, regex


class NodesNotReadyAlert(AlertBase):
    """At least `count` nodes of one pool NotReady for `for` (needs kube-state-metrics, see README)."""

    severity: Severity = "critical"
    count: int = Field(default=1, ge=1)
    for_: Duration = Field(default="10m", alias="for")


def _pool_nodes_not_ready(facts: PlatformFacts, nodes: NodesNotReadyAlert) -> list[dict[str, Any]]:
    if not facts.pools:
        return []
    label = ksm_label(facts.pool_label)
    expr = (
        "count by (pool) (\n  label_replace(\n"
        '    (max by (node) (kube_node_status_condition{condition="Ready", status="true"}) == 0)\n'
        f"    * on (node) group_left ({label})\n"
        f'    max by (node, {label}) (kube_node_labels{{{label}=~"{regex(facts.pools)}"}}),\n'
        f'    "pool", "$1", "{label}", "(.*)"\n  )\n) >= {nodes.count}'
    )
    return [
        alert(
            "TrainerPlatformPoolNodesNotReady",
            expr,
            nodes.severity,
            "{{ $value }} nodes of pool {{ $labels.pool }} are NotReady",
            f"At least {nodes.count} nodes of node pool {{{{ $labels.pool }}}} have not been Ready for "
            f"{nodes.for_}: Kueue still counts their capacity in the pool's quota.",
            nodes.for_,
        )
    ]


POOL_NODES_NOT_READY = Alert("pool_nodes_not_ready", "nodes", NodesNotReadyAlert, _pool_nodes_not_ready)
