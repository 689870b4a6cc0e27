"""Grafana dashboards (classic JSON model, schemaVersion 39 = Grafana 11.0+; newer Grafana migrates it).

Three views: the platform overview, one team's queue, one TrainJob. Queries use `$__rate_interval`
and template variables; tests substitute them and parse every query with promtool.
"""

from __future__ import annotations

import json
from typing import Any

from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.promql import TEAM_INFO, regex

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
UIDS = {
    "overview": "trainer-platform-overview",
    "team": "trainer-platform-team-queues",
    "trainjob": "trainer-platform-trainjob",
}


def _panel(title: str, exprs: list[tuple[str, str]], kind: str = "timeseries", unit: str = "short") -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _layout(panels: list[dict[str, Any]], width: int = 12, height: int = 8) -> list[dict[str, Any]]:
    """Two panels per row, ids in order: stable output, no overlaps."""
    laid = []
    for i, panel in enumerate(panels):
        x = (i % (24 // width)) * width
        y = (i // (24 // width)) * height
        laid.append({"id": i + 1, "gridPos": {"x": x, "y": y, "w": width, "h": height}, **panel})
    return laid


def _query_var(name: str, query: str, label: str, multi: bool = False, hide: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-var"},
        "definition": query,
        "refresh": 2,
        "multi": multi,
        "includeAll": multi,
        "hide": hide,
        "sort": 1,
    }


def _datasource_var() -> dict[str, Any]:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "hide": 0}


def _dashboard(uid: str, title: str, panels: list[dict[str, Any]], variables: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "tags": ["trainer-platform"],
        "timezone": "utc",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "graphTooltip": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [_datasource_var(), *variables]},
        "annotations": {"list": []},
        "links": [
            {"type": "dashboards", "tags": ["trainer-platform"], "title": "Trainer platform", "asDropdown": True}
        ],
        "panels": _layout(panels),
    }


def overview(facts: PlatformFacts) -> dict[str, Any]:
    jobs = f'job=~"{regex([e.service for e in facts.endpoints])}"'
    cqs = f'cluster_queue=~"{regex([t.cluster_queue for t in facts.teams])}"' if facts.teams else ""
    panels = [
        _panel("Controller targets up", [(f"sum by (job) (up{{{jobs}}})", "{{job}}")], "stat"),
        _panel(
            "Reconcile errors / s",
            [
                (
                    "sum by (job, controller) "
                    f"(rate(controller_runtime_reconcile_errors_total{{{jobs}}}[$__rate_interval]))",
                    "{{job}} {{controller}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Webhook requests / s by code",
            [
                (
                    f"sum by (job, code) (rate(controller_runtime_webhook_requests_total{{{jobs}}}[$__rate_interval]))",
                    "{{job}} {{code}}",
                )
            ],
            unit="reqps",
        ),
        _panel(
            "Webhook p99 latency",
            [
                (
                    "histogram_quantile(0.99, sum by (job, webhook, le) "
                    f"(rate(controller_runtime_webhook_latency_seconds_bucket{{{jobs}}}[$__rate_interval])))",
                    "{{webhook}}",
                )
            ],
            unit="s",
        ),
        _panel("Work queue depth", [(f"sum by (job, name) (workqueue_depth{{{jobs}}})", "{{job}} {{name}}")]),
        _panel(
            "Pending workloads per ClusterQueue",
            [
                (
                    f"sum by (cluster_queue) (max by (cluster_queue, status) (kueue_pending_workloads{{{cqs}}}))",
                    "{{cluster_queue}}",
                )
            ],
        ),
        _panel(
            "Admitted workloads per ClusterQueue",
            [(f"max by (cluster_queue) (kueue_admitted_active_workloads{{{cqs}}})", "{{cluster_queue}}")],
        ),
        _panel(
            "Reserved / nominal quota per ClusterQueue",
            [
                (
                    f"max by (cluster_queue, resource) (kueue_cluster_queue_resource_reservation{{{cqs}}})\n"
                    f"/ max by (cluster_queue, resource) (kueue_cluster_queue_nominal_quota{{{cqs}}} > 0)",
                    "{{cluster_queue}} {{resource}}",
                )
            ],
            unit="percentunit",
        ),
        _panel(
            "Failed and completed JobSets (since controller start)",
            [
                ("count by (namespace) (jobset_failed_total)", "failed {{namespace}}"),
                ("count by (namespace) (jobset_completed_total)", "completed {{namespace}}"),
            ],
        ),
    ]
    return _dashboard(UIDS["overview"], "Trainer platform / Overview", panels, [])


def team_queues(facts: PlatformFacts) -> dict[str, Any]:
    cq = 'cluster_queue=~"$cluster_queue"'
    fr = "cluster_queue, flavor, resource"
    panels = [
        _panel(
            "Quota: reserved, admitted, nominal, borrowing limit",
            [
                (
                    f"max by ({fr}) (kueue_cluster_queue_resource_reservation{{{cq}}})",
                    "reserved {{flavor}} {{resource}}",
                ),
                (f"max by ({fr}) (kueue_cluster_queue_resource_usage{{{cq}}})", "admitted {{flavor}} {{resource}}"),
                (f"max by ({fr}) (kueue_cluster_queue_nominal_quota{{{cq}}})", "nominal {{flavor}} {{resource}}"),
                (
                    f"max by ({fr}) (kueue_cluster_queue_borrowing_limit{{{cq}}})",
                    "borrowing limit {{flavor}} {{resource}}",
                ),
            ],
        ),
        _panel(
            "Borrowed (reserved above nominal)",
            [
                (
                    f"clamp_min(max by ({fr}) (kueue_cluster_queue_resource_reservation{{{cq}}})\n"
                    f"- max by ({fr}) (kueue_cluster_queue_nominal_quota{{{cq}}}), 0)",
                    "{{flavor}} {{resource}}",
                )
            ],
        ),
        _panel(
            "Pending workloads",
            [(f"max by (cluster_queue, status) (kueue_pending_workloads{{{cq}}})", "{{status}}")],
        ),
        _panel(
            "Pending resources",
            [(f"max by (cluster_queue, resource) (kueue_cluster_queue_resource_pending{{{cq}}})", "{{resource}}")],
        ),
        _panel(
            "Admission wait (p50, p90)",
            [
                (
                    f"histogram_quantile({q}, sum by (le) (rate(kueue_admission_wait_time_seconds_bucket{{{cq}}}"
                    "[$__rate_interval])))",
                    f"p{int(q * 100)}",
                )
                for q in (0.5, 0.9)
            ],
            unit="s",
        ),
        _panel(
            "Admissions and evictions / s",
            [
                (
                    f"sum by (cluster_queue) (rate(kueue_admitted_workloads_total{{{cq}}}[$__rate_interval]))",
                    "admitted",
                ),
                (
                    f"sum by (reason) (rate(kueue_evicted_workloads_total{{{cq}}}[$__rate_interval]))",
                    "evicted {{reason}}",
                ),
                (
                    'sum by (reason) (rate(kueue_preempted_workloads_total{preempting_cluster_queue=~"$cluster_queue"}'
                    "[$__rate_interval]))",
                    "preempting others: {{reason}}",
                ),
            ],
            unit="reqps",
        ),
    ]
    variables = [
        _query_var("team", f"label_values({TEAM_INFO}, team)", "Team"),
        _query_var(
            "cluster_queue", f'label_values({TEAM_INFO}{{team="$team"}}, cluster_queue)', "ClusterQueue", hide=2
        ),
    ]
    return _dashboard(UIDS["team"], "Trainer platform / Team queue", panels, variables)


def trainjob(facts: PlatformFacts) -> dict[str, Any]:
    # Pods of a TrainJob belong to its JobSet (same name): <trainjob>-<replicatedJob>-<i>-<j>-<hash>.
    pod = 'namespace="$namespace", pod=~"$trainjob-.+"'
    panels = [
        _panel("Pods by phase", [(f"sum by (phase) (kube_pod_status_phase{{{pod}}})", "{{phase}}")]),
        _panel(
            "Container restarts",
            [(f"sum by (pod) (kube_pod_container_status_restarts_total{{{pod}}})", "{{pod}}")],
        ),
        _panel(
            "CPU (cores)",
            [
                (
                    f'sum by (pod) (rate(container_cpu_usage_seconds_total{{{pod}, container!=""}}[$__rate_interval]))',
                    "{{pod}}",
                )
            ],
        ),
        _panel(
            "Memory working set",
            [(f'sum by (pod) (container_memory_working_set_bytes{{{pod}, container!=""}})', "{{pod}}")],
            unit="bytes",
        ),
        _panel(
            "GPU utilisation (DCGM exporter)",
            [
                (
                    'avg by (exported_pod) (DCGM_FI_DEV_GPU_UTIL{exported_namespace="$namespace", '
                    'exported_pod=~"$trainjob-.+"})',
                    "{{exported_pod}}",
                )
            ],
            unit="percent",
        ),
        _panel(
            "JobSet outcome",
            [
                ('max(jobset_completed_total{namespace="$namespace", jobset_name="$trainjob"})', "completed"),
                ('max(jobset_failed_total{namespace="$namespace", jobset_name="$trainjob"})', "failed"),
            ],
            "stat",
        ),
    ]
    variables = [
        _query_var("namespace", f"label_values({TEAM_INFO}, namespace)", "Team namespace"),
        {
            "name": "trainjob",
            "label": "TrainJob",
            "type": "textbox",
            "query": "",
            "hide": 0,
        },
    ]
    return _dashboard(UIDS["trainjob"], "Trainer platform / TrainJob", panels, variables)


def dashboards(facts: PlatformFacts) -> dict[str, dict[str, Any]]:
    """File name → dashboard JSON, in a fixed order."""
    return {
        "trainer-platform-overview.json": overview(facts),
        "trainer-platform-team-queues.json": team_queues(facts),
        "trainer-platform-trainjob.json": trainjob(facts),
    }


def dashboard_text(dashboard: dict[str, Any]) -> str:
    """Deterministic JSON text for a ConfigMap."""
    return json.dumps(dashboard, indent=2, sort_keys=True) + "\n"
