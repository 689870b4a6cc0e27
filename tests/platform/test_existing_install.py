"""`components.<name>.install: false`: the cluster already runs the component. The stack neither installs, changes
nor deletes its chart or namespace, still waits for its API (the readiness gate) before anything it serves, and
refuses settings that would reach only the chart. The fleet by `pulumi up` runs on such clusters
(tests/e2e/test_pulumi_fleet.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import plan_of, stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.stack.validate import validate

GATE = "pulumi-python:dynamic:Resource"
CHART = "kubernetes:helm.sh/v4:Chart"


def _local(**components: Any) -> dict[str, Any]:
    raw = stack_raw("local")
    raw["components"] = {**raw.get("components", {}), **components}
    return raw


def test_default_installs_every_chart() -> None:
    plan = plan_of(_local())
    assert {r.name for r in plan.releases} >= {"jobset", "trainer", "kueue"}
    assert all(g.release for g in plan.gates if g.component in ("jobset", "trainer", "kueue"))


def test_an_installed_component_keeps_only_its_gate_and_what_it_serves_waits_for_it() -> None:
    plan = plan_of(_local(trainer={"install": False}))
    assert "trainer" not in {r.name for r in plan.releases}
    namespaces = {o.manifest["metadata"]["name"] for o in plan.objects if o.manifest["kind"] == "Namespace"}
    assert "kubeflow-system" not in namespaces, "the existing install's namespace is not ours to create or delete"
    assert {"jobset-system", "kueue-system"} <= namespaces
    (gate,) = [g for g in plan.gates if g.component == "trainer"]
    assert gate.release == "" and gate.crds and gate.probes
    assert "components.trainer.install is false" in gate.hint and "kubeflow-system" in gate.hint

    captured = capture(lambda: deploy(plan), "test")
    records = captured.registrations
    assert not [r for r in records if r.type == CHART and r.name == "trainer"]
    trainer_gate = next(r for r in records if r.type == GATE and r.inputs["component"] == "trainer")
    kueue_chart = next(r for r in records if r.type == CHART and r.name == "kueue")
    assert trainer_gate.urn in kueue_chart.dependencies, "Kueue's chart (after: trainer) waits for Trainer's API"
    runtimes = [r for r in records if r.inputs.get("kind") == "ClusterTrainingRuntime"]
    assert runtimes and all(trainer_gate.urn in r.dependencies for r in runtimes)


@pytest.mark.parametrize(
    ("setting", "path"),
    [
        ({"replicas": 2}, "components.kueue.replicas"),
        ({"values": {"controllerManager": {}}}, "components.kueue.values"),
        ({"featureGates": {"MultiKueue": True}}, "components.kueue.featureGates"),
        ({"resources": {"requests": {"cpu": "1"}}}, "components.kueue.resources"),
    ],
)
def test_a_chart_setting_without_the_chart_is_refused(setting: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(_local(kueue={"install": False, **setting}))
    found = [(i.path, i.message, i.hint) for i in err.value.issues]
    assert any(p == path and "does not install the chart" in m and "install: true" in (h or "") for p, m, h in found), (
        found
    )


def test_settings_the_program_reads_stay_allowed() -> None:
    """Version, namespace and Kueue's integrations describe the install: the program uses them (API versions, the
    controller identities the admission rules trust, MultiKueue's RBAC on workers)."""
    validated = validate(_local(kueue={"install": False, "version": "0.19.2", "trainJobIntegration": True}))
    assert validated.releases.by_name["kueue"].install is False
