"""The offline render runs the real program under mocks: what it writes is what `pulumi up` would create."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance import Conformance
from tests.helpers import MINIMAL, STACKS, conformance_findings, plan_of, render, resource, stack_raw, with_changes
from trainer_infra.core.upstream import kueue
from trainer_infra.render.output import Rendered

ALL_STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in STACKS.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_stack_renders_conformant_objects(stack: str) -> None:
    raw = stack_raw(stack)
    rendered = render(raw, stack)
    assert rendered.manifests, "a stack renders at least the controller namespaces"
    findings = conformance_findings(raw, rendered)
    assert findings == [], "\n".join(map(str, findings))


def test_render_is_byte_identical_across_runs(tmp_path: Path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / str(i)
        subprocess.run(
            [sys.executable, "-m", "trainer_infra", "render", "--stack", "local", "--out", str(out)],
            check=True,
            cwd=STACKS.parent,
            capture_output=True,
        )
        outs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert set(outs[0]) == {"manifests.yaml", "helm-releases.yaml", "resources.json"}
    assert outs[0] == outs[1]


def test_controllers_install_in_order_and_custom_resources_wait_for_gates() -> None:
    rendered = render(MINIMAL)
    assert "jobset-ready" in resource(rendered, "trainer")["dependsOn"]
    assert "trainer-ready" in resource(rendered, "kueue")["dependsOn"]
    for component in ("jobset", "trainer", "kueue"):
        gate = resource(rendered, f"{component}-ready")
        assert component in gate["dependsOn"], "a gate opens only after its chart is ready"
        assert gate["inputs"]["crds"], "a gate checks its CRDs are Established"
        assert gate["inputs"]["probes"], "a gate proves its webhook answers"


def test_chart_crds_are_protected_unless_data_loss_is_allowed() -> None:
    protected = render(MINIMAL)
    for name in ("jobset", "trainer", "kueue"):
        policy = resource(protected, name)["childPolicy"]["CustomResourceDefinition"]
        assert policy == {"protect": True, "retainOnDelete": True}
    unprotected = render({**MINIMAL, "allowDataLoss": True})
    policy = resource(unprotected, "kueue")["childPolicy"]["CustomResourceDefinition"]
    assert policy == {"protect": False, "retainOnDelete": False}


def test_trainer_chart_never_installs_jobset_or_runtimes() -> None:
    values = next(r for r in render(MINIMAL).releases if r["name"] == "trainer")["values"]
    assert values["jobset"] == {"install": False}
    assert values["runtimes"]["defaultEnabled"] is False
    assert all(
        v.get("enabled") is False
        for k, v in values["runtimes"].items()
        if isinstance(v, dict) and k != "torchtuneDistributed"
    )


def test_kueue_integrates_trainjobs_and_tas_is_configurable() -> None:
    release = next(r for r in render(MINIMAL).releases if r["name"] == "kueue")
    manager = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "trainer.kubeflow.org/trainjob" in manager["integrations"]["frameworks"]
    gates = release["values"]["controllerManager"]["featureGates"]
    assert {"name": "TopologyAwareScheduling", "enabled": True} in gates
    off = render({**MINIMAL, "components": {"kueue": {"tas": {"enabled": False}}}})
    gates = next(r for r in off.releases if r["name"] == "kueue")["values"]["controllerManager"]["featureGates"]
    assert {"name": "TopologyAwareScheduling", "enabled": False} in gates
    # Kueue exits when a default-on gate that requires TAS stays on (pkg/config/validation.go): they go with it,
    # unless the stack sets one itself
    assert {g["name"] for g in gates if g["enabled"] is False} >= set(kueue.TAS_DEPENDENT_GATES)
    kept = {"tas": {"enabled": False}, "featureGates": {"TASProfileMixed": True}}
    kept_gates = next(r for r in render({**MINIMAL, "components": {"kueue": kept}}).releases if r["name"] == "kueue")
    assert {"name": "TASProfileMixed", "enabled": True} in kept_gates["values"]["controllerManager"]["featureGates"]


def test_registry_and_chart_mirrors_rewrite_every_reference() -> None:
    raw = {
        **MINIMAL,
        "images": {"registryMirror": "mirror.corp:5000/k8s"},
        "charts": {"repositoryMirror": "oci://mirror.corp/charts"},
    }
    rendered = render(raw)
    values = {r["name"]: r["values"] for r in rendered.releases}
    images = [
        values["jobset"]["image"]["repository"],
        values["trainer"]["image"]["registry"] + "/" + values["trainer"]["image"]["repository"],
        values["kueue"]["controllerManager"]["manager"]["image"]["repository"],
        *(
            c["image"]
            for r in rendered.resources
            if r["name"].endswith("-ready")
            for p in r["inputs"]["probes"]
            for c in _containers(p)
        ),
    ]
    assert len(images) == 5  # three controllers, the JobSet and Trainer webhook probes
    assert all(i.startswith("mirror.corp:5000/k8s/") for i in images), images
    assert all(r["chart"].startswith("oci://mirror.corp/charts/") for r in rendered.releases)


def _containers(obj: object) -> list[dict[str, str]]:
    if isinstance(obj, dict):
        found = list(obj.get("containers", []))
        return found + [c for v in obj.values() for c in _containers(v)]
    if isinstance(obj, list):
        return [c for v in obj for c in _containers(v)]
    return []


def test_escape_hatch_values_win() -> None:
    raw = {**MINIMAL, "components": {"jobset": {"values": {"controller": {"replicas": 3}}}}}
    jobset = next(r for r in render(raw).releases if r["name"] == "jobset")
    assert jobset["values"]["controller"]["replicas"] == 3
    assert jobset["values"]["controller"]["resources"]["requests"]["cpu"] == "100m"


def test_integers_stay_integers_and_secrets_never_appear(tmp_path: Path) -> None:
    raw = {**MINIMAL, "kubernetes": {"version": "1.34", "kubeconfig": "apiVersion: v1\nclusters: [topsecret]"}}
    rendered = render(raw)
    gate = resource(rendered, "kueue-ready")
    assert gate["inputs"]["timeoutSeconds"] == 300 and isinstance(gate["inputs"]["timeoutSeconds"], int)
    assert gate["inputs"]["kubeconfig"] == "<secret>"
    assert "topsecret" not in yaml.safe_dump([rendered.manifests, rendered.releases, rendered.resources])


def test_trainer_2_3_renders_conformant_objects_against_its_own_crds() -> None:
    raw = {
        **MINIMAL,
        "components": {"trainer": {"version": "2.3.0"}, "kueue": {"trainJobIntegration": False}},
    }
    rendered = render(raw)
    values = next(r for r in rendered.releases if r["name"] == "trainer")["values"]
    assert values["crds"] == {"enabled": True}, "v2.3 renders its CRDs from templates behind crds.enabled"
    kueue = next(r for r in rendered.releases if r["name"] == "kueue")
    assert "trainer.kubeflow.org/trainjob" not in kueue["values"]["managerConfig"]["controllerManagerConfigYaml"]
    assert conformance_findings(raw, rendered) == []
    checker = Conformance("1.34", {"trainer": "2.3.0", "jobset": "0.12.0", "kueue": "0.19.2"})
    probes = [probe for gate in plan_of(raw).gates for probe in gate.probes]
    assert {p["kind"] for p in probes} == {"JobSet", "ClusterTrainingRuntime", "ResourceFlavor"}
    for probe in probes:
        assert checker.check(probe) == [], "gate probes must be valid objects or the gate never opens"


def test_stack_outputs_report_versions_and_namespaces() -> None:
    outputs = render(MINIMAL).outputs
    assert outputs["versions"] == {"jobset": "0.12.0", "trainer": "2.2.1", "kueue": "0.19.2"}
    assert outputs["namespaces"] == {"jobset": "jobset-system", "trainer": "kubeflow-system", "kueue": "kueue-system"}
    assert outputs["kubernetesVersion"] == "1.34"


def test_every_custom_resource_waits_for_the_gate_of_its_api_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Later areas only add PlanParts; the dependency on the right gate (and namespace) is automatic."""
    from trainer_infra.core.objects import ManagedObject, PlanPart
    from trainer_infra.manifests.meta import metadata, namespace
    from trainer_infra.stack import build

    def extra(_cfg: object) -> PlanPart:
        return PlanPart(
            objects=(
                ManagedObject(namespace("team-a")),
                ManagedObject(
                    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": metadata("q", "team-a")}
                ),
                ManagedObject(
                    {
                        "apiVersion": "trainer.kubeflow.org/v1alpha1",
                        "kind": "ClusterTrainingRuntime",
                        "metadata": metadata("r"),
                    }
                ),
                ManagedObject({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata("c", "team-a")}),
            )
        )

    monkeypatch.setattr(build, "PLANNERS", [*build.PLANNERS, extra])
    rendered = render(MINIMAL)
    assert resource(rendered, "localqueue-team-a-q")["dependsOn"] == ["kueue-ready", "namespace-team-a"]
    assert resource(rendered, "clustertrainingruntime-r")["dependsOn"] == ["trainer-ready"]
    assert resource(rendered, "configmap-team-a-c")["dependsOn"] == ["namespace-team-a"]


def test_team_fair_sharing_weights_turn_on_fair_sharing_in_kueue() -> None:
    def manager_config(raw: dict[str, object]) -> dict[str, object]:
        kueue = next(r for r in render(raw).releases if r["name"] == "kueue")
        loaded: dict[str, object] = yaml.safe_load(kueue["values"]["managerConfig"]["controllerManagerConfigYaml"])
        return loaded

    assert "fairSharing" not in manager_config({**MINIMAL, "teams": [{"name": "a"}]})
    weighted = manager_config({**MINIMAL, "teams": [{"name": "a", "fairSharingWeight": "2"}]})
    assert weighted["fairSharing"] == {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


CONTROLLER_RESOURCES = {
    "jobset": ("controller", "resources"),
    "kueue": ("controllerManager", "manager", "resources"),
    "trainer": ("manager", "resources"),
}


def _controller_resources(rendered: Rendered, release: str) -> dict[str, Any]:
    values: dict[str, Any] = next(r for r in rendered.releases if r["name"] == release)["values"]
    for key in CONTROLLER_RESOURCES[release]:
        values = values[key]
    return values


def test_charts_keep_no_cpu_limit_of_their_own() -> None:
    """Kueue and JobSet default `limits.cpu: 2`; Helm merges maps key by key, so only a null removes it
    (the e2e's `pulumi preview` shows the charts' Deployments without it)."""
    rendered = render(MINIMAL)
    for release in CONTROLLER_RESOURCES:
        assert _controller_resources(rendered, release)["limits"] == {"cpu": None, "memory": "1Gi"}, release


def test_a_configured_cpu_limit_is_kept() -> None:
    raw = with_changes(
        MINIMAL,
        components={"kueue": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}}},
    )
    limits = _controller_resources(render(raw), "kueue")["limits"]
    assert limits == {"cpu": "2", "memory": None}
