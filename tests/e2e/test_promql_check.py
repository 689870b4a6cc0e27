"""The name check of the observability proof, on hand-made inputs (runs in `make test`)."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.promql import check_names, parse_exposition, render_expressions, substitute_grafana
from tests.observability.fixtures import FACTS, SETTINGS
from trainer_infra.observability.objects import observability_objects

EXPOSITION = """# HELP kueue_pending_workloads The number of pending workloads
# TYPE kueue_pending_workloads gauge
kueue_pending_workloads{cluster_queue="nlp",replica_role="standalone",status="active"} 0
controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="0.1"} 3
process_start_time_seconds 1.7e+09
"""


def test_exposition_names_and_labels() -> None:
    seen = parse_exposition(EXPOSITION)
    assert seen["kueue_pending_workloads"] == {"cluster_queue", "replica_role", "status"}
    assert seen["controller_runtime_webhook_latency_seconds_bucket"] == {"webhook", "le"}
    assert seen["process_start_time_seconds"] == set()


def test_grafana_variables_become_parseable() -> None:
    expr = 'rate(x{cluster_queue=~"$cluster_queue", pod=~"${trainjob}-.+"}[$__rate_interval])'
    assert substitute_grafana(expr) == 'rate(x{cluster_queue=~"x", pod=~"x-.+"}[5m])'


def _item(
    selectors: list[tuple[str, list[str]]], grouping: list[tuple[list[str], list[str]]] | None = None
) -> dict[str, Any]:
    return {
        "selectors": [{"metric": m, "labels": ls} for m, ls in selectors],
        "grouping": [{"labels": ls, "metrics": ms} for ls, ms in grouping or []],
        "produced": [],
    }


def test_unknown_metric_label_and_grouping_are_reported() -> None:
    exported = parse_exposition(EXPOSITION)
    analyses = {
        "ok": _item(
            [("kueue_pending_workloads", ["cluster_queue", "job"])], [(["status"], ["kueue_pending_workloads"])]
        ),
        "typo": _item([("kueue_pending_workload", [])]),
        "label": _item([("kueue_pending_workloads", ["clusterqueue"])]),
        "group": _item([("kueue_pending_workloads", [])], [(["team"], ["kueue_pending_workloads"])]),
        "joined": _item(
            [("kueue_pending_workloads", []), ("team_info", [])], [(["team"], ["kueue_pending_workloads", "team_info"])]
        ),
        "external": _item([("kube_node_labels", ["label_x_io_pool", "node"]), ("up", ["pod_name"])]),
        "broken": {"error": "1:5: parse error", "selectors": [], "grouping": [], "produced": []},
    }
    result = check_names(analyses, exported, {"team_info": {"team", "cluster_queue"}})
    assert result.problems == [
        "broken: does not parse: 1:5: parse error",
        "external: metric up has no label 'pod_name'",
        "group: label 'team' (by/on/group) is on none of ['kueue_pending_workloads']",
        "label: metric kueue_pending_workloads has no label 'clusterqueue'",
        "typo: metric kueue_pending_workload is not exported by any controller",
    ]


def test_every_rule_and_query_has_its_own_place() -> None:
    """Alerts repeat per team and panels hold several queries: each keeps its own entry."""
    objects = observability_objects(FACTS, SETTINGS)
    found = render_expressions(objects)
    rules = [r for o in objects if o["kind"] == "PrometheusRule" for g in o["spec"]["groups"] for r in g["rules"]]
    targets = [
        t
        for o in objects
        if o["kind"] == "ConfigMap"
        for d in o["data"].values()
        for p in json.loads(d)["panels"]
        for t in p["targets"]
    ]
    assert len(found) == len({where for where, _ in found}) == len(rules) + len(targets)
