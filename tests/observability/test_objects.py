"""The observability objects: deterministic, scrape settings per controller, dashboards well formed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.observability.fixtures import FACTS, SETTINGS
from trainer_infra.observability.alerts.model import duration_seconds
from trainer_infra.observability.alerts.registry import ALERTS
from trainer_infra.observability.dashboards import SCHEMA_VERSION, dashboards
from trainer_infra.observability.objects import observability_objects
from trainer_infra.observability.settings import ObservabilitySettings


def test_off_means_no_objects() -> None:
    assert observability_objects(FACTS, ObservabilitySettings()) == []


def test_same_input_same_objects() -> None:
    first = json.dumps(observability_objects(FACTS, SETTINGS), sort_keys=True)
    assert first == json.dumps(observability_objects(FACTS, SETTINGS), sort_keys=True)


def test_token_only_where_the_controller_checks_it() -> None:
    monitors = {
        o["metadata"]["name"]: o for o in observability_objects(FACTS, SETTINGS) if o["kind"] == "ServiceMonitor"
    }
    assert sorted(monitors) == ["trainer-platform-jobset", "trainer-platform-kueue", "trainer-platform-trainer"]
    for name, monitor in monitors.items():
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
        assert ("bearerTokenFile" in endpoint) == (name != "trainer-platform-trainer"), name
    assert monitors["trainer-platform-trainer"]["spec"]["endpoints"][0]["port"] == "monitoring-port"
    # jobset_failed_total{namespace} must stay the JobSet's namespace (the team alerts select on it)
    honor = {name: m["spec"]["endpoints"][0].get("honorLabels", False) for name, m in monitors.items()}
    assert honor == {
        "trainer-platform-jobset": True,
        "trainer-platform-kueue": False,
        "trainer-platform-trainer": False,
    }


def test_prometheus_service_account_may_get_metrics() -> None:
    settings = ObservabilitySettings.model_validate(
        {"enabled": True, "prometheus": {"serviceAccount": {"namespace": "obs", "name": "prom"}}}
    )
    objects = observability_objects(FACTS, settings)
    role = next(o for o in objects if o["kind"] == "ClusterRole")
    binding = next(o for o in objects if o["kind"] == "ClusterRoleBinding")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prom", "namespace": "obs"}]


def test_selector_labels_reach_monitors_and_rules() -> None:
    settings = ObservabilitySettings.model_validate(
        {"enabled": True, "prometheus": {"selectorLabels": {"release": "kps"}}}
    )
    for obj in observability_objects(FACTS, settings):
        if obj["kind"] in ("ServiceMonitor", "PrometheusRule"):
            assert obj["metadata"]["labels"]["release"] == "kps", obj["metadata"]["name"]


def test_dashboards_are_sidecar_config_maps_with_valid_json() -> None:
    maps = [o for o in observability_objects(FACTS, SETTINGS) if o["kind"] == "ConfigMap"]
    assert len(maps) == 3
    uids = set()
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((filename, text),) = cm["data"].items()
        assert filename == cm["metadata"]["name"] + ".json"
        board = json.loads(text)
        assert board["schemaVersion"] == SCHEMA_VERSION
        uids.add(board["uid"])
    assert len(uids) == 3


@pytest.mark.parametrize("name", sorted(dashboards(FACTS)))
def test_panels_have_ids_targets_and_no_overlap(name: str) -> None:
    board = dashboards(FACTS)[name]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24
        area = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & area, panel["title"]
        cells |= area
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)) and all(t["expr"].strip() for t in panel["targets"])
    variables = {v["name"] for v in board["templating"]["list"]}
    used = {
        w[1:]
        for p in board["panels"]
        for t in p["targets"]
        for w in t["expr"].replace('"', " ").split()
        if w.startswith("$") and not w.startswith("$__")
    }
    assert {v.split("-")[0].rstrip(".+)}") for v in used} <= variables


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"alerts": {"controllerDown": {"for": "-5m"}}}, ("alerts", "controllerDown", "for")),
        ({"alerts": {"workloadsPending": {"for": "0s"}}}, ("alerts", "workloadsPending", "for")),
        ({"alerts": {"quotaSaturated": {"ratio": 1.5}}}, ("alerts", "quotaSaturated", "ratio")),
        ({"alerts": {"trainJobFailures": {"window": "soon"}}}, ("alerts", "trainJobFailures", "window")),
        ({"alerts": {"borrowing": {"ratio": -1}}}, ("alerts", "borrowing", "ratio")),
        ({"alerts": {"webhookLatency": {"treshold": 2}}}, ("alerts", "webhookLatency", "treshold")),
    ],
)
def test_thresholds_that_cannot_work_are_errors_with_a_path(patch: dict[str, object], path: tuple[str, ...]) -> None:
    with pytest.raises(ValidationError) as err:
        ObservabilitySettings.model_validate(patch)
    assert [tuple(e["loc"]) for e in err.value.errors()] == [path]


def test_durations() -> None:
    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("500ms") == 0.5


def test_every_alert_has_a_runbook_section() -> None:
    for entry in ALERTS:  # each registered alert is rendered below, so its runbook section is checked
        assert entry.render(FACTS, SETTINGS.alerts), entry.name
    doc = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    headings = {line[4:].strip() for line in doc.splitlines() if line.startswith("### ")}
    rules = [
        r
        for o in observability_objects(FACTS, SETTINGS)
        if o["kind"] == "PrometheusRule"
        for g in o["spec"]["groups"]
        for r in g["rules"]
        if "alert" in r
    ]
    assert rules
    for rule in rules:
        assert rule["alert"] in headings, rule["alert"]
        assert rule["annotations"]["runbook"] == f"docs/observability.md#{rule['alert'].lower()}"
