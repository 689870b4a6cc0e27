"""The observability block in a stack: what it adds, what it never changes, and configs it refuses."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.helpers import conformance_findings, plan_of, render, stack_raw, with_changes
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.objects import Plan
from trainer_infra.platform import gate
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
        # the platform creates (and would delete) its namespace: never a system or another part's one
        ({"namespace": "kube-system"}, "observability.namespace", "system namespace"),
        ({"namespace": "kueue-system"}, "observability.namespace", "kueue controller's namespace"),
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


def test_without_the_operator_crds_pulumi_up_refuses_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CRD gate (every monitoring object depends on it) fails fast and says how to fix it."""
    plan = plan_of(_on(stack_raw("local")))
    crd_gate = next(g for g in plan.gates if g.name == "prometheus-operator-crds")
    assert crd_gate.release == "" and crd_gate.api_groups == ("monitoring.coreos.com",)

    class MissingError(Exception):
        status = 404

    client = SimpleNamespace(
        ApiException=MissingError,
        ApiextensionsV1Api=lambda _api: SimpleNamespace(read_custom_resource_definition=_raise(MissingError())),
    )
    monkeypatch.setattr(gate, "_client", lambda *_: (client, None))
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.01)
    inputs = {
        "component": crd_gate.component,
        "version": crd_gate.version,
        "crds": list(crd_gate.crds),
        "probes": [],
        "timeoutSeconds": 0.05,
        "hint": crd_gate.hint,
    }
    with pytest.raises(TimeoutError) as info:
        gate.wait_ready(inputs)
    message = str(info.value)
    assert "servicemonitors.monitoring.coreos.com" in message
    assert "install the Prometheus Operator" in message and "observability.enabled: false" in message


def _raise(exc: Exception) -> Any:
    def fail(*_: Any) -> None:
        raise exc

    return fail


def test_monitoring_objects_wait_for_the_crd_gate() -> None:
    rendered = render(_on(stack_raw("local")))
    monitoring = [r for r in rendered.resources if "monitoring.coreos.com" in r["type"]]
    assert len(monitoring) == 4
    assert all("prometheus-operator-crds" in r["dependsOn"] for r in monitoring)


def test_dashboards_are_replaced_delete_first() -> None:
    """The Kubernetes provider replaces a ConfigMap whose data changed, and a dashboard's data follows the teams:
    with its fixed name only a delete-first replacement works (the e2e's `up` adding a team failed with
    "configmaps ... already exists")."""
    plan = plan_of(_on(stack_raw("local")))
    dashboards = [o for o in plan.objects if o.manifest["kind"] == "ConfigMap"]
    assert dashboards and all(o.delete_before_replace for o in dashboards)
    assert any("vision" in text for o in dashboards for text in o.manifest["data"].values())
    assert not any(o.delete_before_replace for o in plan.objects if o.manifest["kind"] == "PrometheusRule")
