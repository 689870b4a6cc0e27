"""The observability block in a stack: what it adds, what it never changes, and configs it refuses."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helpers import conformance_findings, plan_of, render, stack_raw, with_changes
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.objects import Plan
from trainer_infra.stack.validate import validate

OBSERVABILITY_KINDS = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ServiceMonitor",
    "PrometheusRule",
    "ConfigMap",
}


def _on(raw: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return with_changes(raw, observability={"enabled": True, **settings})


def _kueue_config(plan: Plan) -> dict[str, Any]:
    release = next(r for r in plan.releases if r.name == "kueue")
    config: dict[str, Any] = yaml.safe_load(release.values["managerConfig"]["controllerManagerConfigYaml"])
    return config


def test_observability_never_changes_scheduling() -> None:
    """Everything the local stack renders without the block is rendered identically with it; the block
    only adds its own objects, its CRD gate and Kueue's queue-metrics switch."""
    base = stack_raw("local")
    off, on = plan_of(base), plan_of(_on(base))
    off_objects = {o.key: o for o in off.objects}
    on_objects = {o.key: o for o in on.objects}
    assert set(off_objects) < set(on_objects)
    assert all(on_objects[k] == off_objects[k] for k in off_objects), "an existing object changed"
    added = [on_objects[k].manifest for k in sorted(set(on_objects) - set(off_objects))]
    assert {o["kind"] for o in added} == OBSERVABILITY_KINDS
    assert [g.name for g in on.gates if g not in off.gates] == ["prometheus-operator-crds"]
    assert [r.name for r in on.releases] == [r.name for r in off.releases]
    for before, after in zip(off.releases, on.releases, strict=True):
        if before.name != "kueue":
            assert before == after, before.name
    kueue_on, kueue_off = _kueue_config(on), _kueue_config(off)
    assert kueue_on["metrics"].pop("enableClusterQueueResources") is True
    assert kueue_on == kueue_off


def test_alerts_and_dashboards_follow_the_stack() -> None:
    plan = plan_of(_on(stack_raw("local"), alerts={"workloadsPending": {"teams": {"vision": "2h"}}}))
    rule = next(o.manifest for o in plan.objects if o.manifest["kind"] == "PrometheusRule")
    pending = [
        r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "TrainerPlatformWorkloadsPending"
    ]
    assert {(r["labels"]["team"], r["for"]) for r in pending} == {("nlp", "30m"), ("vision", "2h")}
    nodes = next(
        r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") == "TrainerPlatformPoolNodesNotReady"
    )
    assert 'label_trainer_platform_io_node_pool=~"h100"' in nodes["expr"]
    monitors = {
        o.manifest["metadata"]["namespace"]: o.manifest for o in plan.objects if o.manifest["kind"] == "ServiceMonitor"
    }
    assert sorted(monitors) == ["jobset-system", "kubeflow-system", "kueue-system"]
    trainer = monitors["kubeflow-system"]["spec"]
    assert trainer["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "trainer"
    assert trainer["endpoints"][0]["port"] == "monitoring-port"


def test_monitoring_objects_conform_to_the_pinned_crds() -> None:
    raw = stack_raw("prod")
    rendered = render(raw, "prod")
    kinds = {m["kind"] for m in rendered.manifests}
    assert {"ServiceMonitor", "PrometheusRule"} <= kinds
    assert conformance_findings(raw, rendered) == []


@pytest.mark.parametrize(
    ("settings", "path", "text"),
    [
        (
            {"alerts": {"workloadsPending": {"teams": {"nlpp": "1h"}}}},
            "observability.alerts.workloadsPending.teams.nlpp",
            "did you mean 'nlp'",
        ),
        ({"alerts": {"controllerDown": {"for": "-5m"}}}, "observability.alerts.controllerDown.for", "positive"),
        ({"alerts": {"quotaSaturated": {"ratio": 2}}}, "observability.alerts.quotaSaturated.ratio", "1"),
    ],
)
def test_thresholds_that_cannot_work_are_refused_with_their_path(
    settings: dict[str, Any], path: str, text: str
) -> None:
    with pytest.raises(ConfigError) as err:
        validate(_on(stack_raw("local"), **settings))
    (issue,) = err.value.issues
    assert issue.path == path
    assert text in issue.render()
