"""Fast checks of the harness's pure parts (no binaries, no processes): they run in ``make test``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, plan_of
from trainer_infra.sandbox.build import GO_SRC, kube_go_mod, kube_version_ldflags, parse_staging_replaces
from trainer_infra.sandbox.charts import ChartError, chart_archive
from trainer_infra.sandbox.charts import controller_users as chart_controller_users
from trainer_infra.sandbox.kwok_stages import kwok_complete_stage, kwok_fail_stage
from trainer_infra.sandbox.processes import ephemeral_port_range, free_port, port_window
from trainer_infra.sandbox.render import (
    RenderError,
    RenderOutput,
    check_versions,
    controller_users,
    kueue_settings,
    load_render,
)
from trainer_infra.sandbox.versions import VersionSet, shared_dir
from trainer_infra.sandbox.webhooks import apply_json_patch, load_kustomized_webhooks, load_upstream_webhooks, localize


def test_json_patch_add_replace_remove() -> None:
    doc: dict[str, Any] = {"metadata": {"name": "a"}, "webhooks": [{"name": "x"}, {"name": "y"}]}
    out = apply_json_patch(
        doc,
        [
            {"op": "replace", "path": "/metadata/name", "value": "b"},
            {"op": "add", "path": "/webhooks/0/objectSelector", "value": {"matchLabels": {"k": "v"}}},
            {"op": "remove", "path": "/webhooks/1"},
        ],
    )
    hook = {"name": "x", "objectSelector": {"matchLabels": {"k": "v"}}}
    assert out == {"metadata": {"name": "b"}, "webhooks": [hook]}
    assert doc["metadata"]["name"] == "a", "input must not be mutated"
    with pytest.raises(KeyError):
        apply_json_patch(doc, [{"op": "replace", "path": "/metadata/missing", "value": 1}])


@pytest.mark.parametrize(
    ("component", "version"),
    [
        ("jobset", "v0.12.0"),
        ("kueue", "v0.19.2"),
        ("trainer", "v2.2.1"),
        ("trainer", "v2.3.0"),
    ],
)
def test_upstream_webhooks_localized(component: str, version: str) -> None:
    folder = shared_dir() / "upstream" / component / version
    configs = localize(load_upstream_webhooks(folder), component, 9443, b"CA")
    assert {c["kind"] for c in configs} <= {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    names = [c["metadata"]["name"] for c in configs]
    assert len(set(names)) == len(names)
    assert all("webhook-configuration" not in n or n.startswith(component) for n in names)
    for cfg in configs:
        for hook in cfg["webhooks"]:
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
            assert "service" not in hook["clientConfig"]


def test_jobset_pod_webhooks_keep_upstream_object_selector() -> None:
    """The kustomize patch limits JobSet's pod webhooks to JobSet pods; losing it would gate every pod."""
    configs = load_upstream_webhooks(shared_dir() / "upstream" / "jobset" / "v0.12.0")
    pod_hooks = [h for c in configs for h in c["webhooks"] if h["name"] in ("mpod.kb.io", "vpod.kb.io")]
    assert len(pod_hooks) == 2
    assert all(h["objectSelector"]["matchExpressions"][0]["key"] == "jobset.sigs.k8s.io/jobset-name" for h in pod_hooks)


def test_trainer_webhook_names_from_patches() -> None:
    configs = load_upstream_webhooks(shared_dir() / "upstream" / "trainer" / "v2.2.1")
    assert sorted(c["metadata"]["name"] for c in configs) == [
        "defaulter.trainer.kubeflow.org",
        "validator.trainer.kubeflow.org",
    ]


def test_kube_go_mod_pins_every_staging_module() -> None:
    gomod = "replace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/kms => ./staging/src/k8s.io/kms\n)\n"
    staging = parse_staging_replaces(gomod)
    assert staging == ["k8s.io/api", "k8s.io/kms"]
    text = kube_go_mod("1.34.4", staging)
    assert "require k8s.io/kubernetes v1.34.4" in text
    assert "\tk8s.io/kms => k8s.io/kms v0.34.4" in text


def test_committed_kube_go_mod_matches_default_versions() -> None:
    gomod = (GO_SRC / "kube" / "go.mod").read_text()
    assert f"require k8s.io/kubernetes v{VersionSet().kubernetes}" in gomod


def test_version_stamp_flags() -> None:
    flags = kube_version_ldflags("1.34.4")
    assert flags["k8s.io/component-base/version.gitVersion"] == "v1.34.4"
    assert flags["k8s.io/client-go/pkg/version.gitMinor"] == "34"


def test_version_set_key_changes_with_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    base = VersionSet()
    monkeypatch.setenv("SANDBOX_TRAINER_VERSION", "v2.3.0")
    other = VersionSet.from_env()
    assert other.trainer == "2.3.0"
    assert other.key != base.key
    assert base.kubernetes_minor == "1.34"


def test_kwok_complete_stage_is_label_gated() -> None:
    stage = kwok_complete_stage()
    keys = [e["key"] for e in stage["spec"]["selector"]["matchExpressions"]]
    assert '.metadata.labels["e2e.trainer-platform/complete"]' in keys
    assert "phase: Succeeded" in stage["spec"]["next"]["statusTemplate"]


def test_kwok_fail_stage_fails_with_the_labelled_exit_code() -> None:
    stage = kwok_fail_stage()
    keys = [e["key"] for e in stage["spec"]["selector"]["matchExpressions"]]
    assert '.metadata.labels["e2e.trainer-platform/fail"]' in keys
    template = stage["spec"]["next"]["statusTemplate"]
    assert 'exitCode: {{ index $.metadata.labels "e2e.trainer-platform/fail" }}' in template
    assert "phase: Failed" in template


def test_lws_webhooks_come_from_the_module_kustomization(tmp_path: Path) -> None:
    """LWS ships webhook manifests + JSON patches listed in its kustomization (pod hooks gated on LWS pods)."""
    (tmp_path / "manifests.yaml").write_text(
        "kind: MutatingWebhookConfiguration\nmetadata: {name: mutating-webhook-configuration}\n"
        "webhooks: [{name: a}, {name: b}]\n"
    )
    (tmp_path / "patch.yaml").write_text("- {op: add, path: /webhooks/1/objectSelector, value: {x: 1}}\n")
    (tmp_path / "kustomization.yaml").write_text(
        "patches: [{path: patch.yaml, target: {kind: MutatingWebhookConfiguration}}]\n"
    )
    [config] = load_kustomized_webhooks(tmp_path)
    assert config["webhooks"] == [{"name": "a"}, {"name": "b", "objectSelector": {"x": 1}}]


def test_render_contract(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"manifests\.yaml"):
        load_render(tmp_path)
    (tmp_path / "manifests.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n")
    (tmp_path / "helm-releases.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "kueue",
                    "chart": "oci://registry.k8s.io/kueue/charts/kueue",
                    "version": "0.19.2",
                    "namespace": "k",
                },
                {"name": "trainer", "chart": "kubeflow-trainer", "version": "2.2.1", "namespace": "t"},
            ]
        )
    )
    render = load_render(tmp_path)
    assert [o["kind"] for o in render.objects] == ["Namespace"]
    check_versions(render, VersionSet())
    with pytest.raises(RenderError, match=r"trainer: stack pins 2\.2\.1, sandbox runs 2\.3\.0"):
        check_versions(render, VersionSet(trainer="2.3.0"))


def test_kueue_settings_take_the_stacks_scheduling_not_its_process_config() -> None:
    """The sandbox's Kueue must schedule like the cluster's (fair sharing, TAS gate) but keep its own ports."""
    weighted = {**MINIMAL, "teams": [{"name": "a", "fairSharingWeight": 2}]}
    values = next(r.values for r in plan_of(weighted).releases if r.name == "kueue")
    release = {"name": "kueue", "chart": "oci://registry.k8s.io/kueue/charts/kueue", "values": values}
    settings = kueue_settings(RenderOutput(Path("."), [], [release]))
    assert "preemptionStrategies" in settings["fairSharing"]
    assert settings["featureGates"]["TopologyAwareScheduling"] is True
    assert "trainer.kubeflow.org/trainjob" in settings["integrations"]["frameworks"]
    assert not {"webhook", "metrics", "health", "leaderElection"} & settings.keys()
    assert kueue_settings(RenderOutput(Path("."), [], [])) == {}


def test_controller_users_follow_the_charts_fullname_rule() -> None:
    """Release `kueue` of chart kueue → `kueue-controller-manager`; release `trainer` of chart kubeflow-trainer
    does not contain the chart name → `trainer-kubeflow-trainer-controller-manager`; overrides win."""
    releases: list[dict[str, Any]] = [
        {"name": "kueue", "chart": "oci://registry.k8s.io/kueue/charts/kueue", "namespace": "kueue-system"},
        {"name": "trainer", "chart": "oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "namespace": "kubeflow-system"},
        {"name": "js", "chart": "jobset", "namespace": "jobset-system", "values": {"fullnameOverride": "jobset"}},
        {"name": "csi-driver-nfs", "chart": "csi-driver-nfs", "namespace": "kube-system"},
    ]
    assert controller_users(RenderOutput(Path("."), [], releases)) == {
        "kueue": "system:serviceaccount:kueue-system:kueue-controller-manager",
        "trainer": "system:serviceaccount:kubeflow-system:trainer-kubeflow-trainer-controller-manager",
        "jobset": "system:serviceaccount:jobset-system:jobset-controller",
    }


def test_kueue_settings_take_the_renders_metric_settings_not_its_address() -> None:
    """With observability on, the sandbox's Kueue reports the per-ClusterQueue gauges the render turns on."""
    observed = {**MINIMAL, "observability": {"enabled": True}}
    values = next(r.values for r in plan_of(observed).releases if r.name == "kueue")
    release = {"name": "kueue", "chart": "oci://registry.k8s.io/kueue/charts/kueue", "values": values}
    settings = kueue_settings(RenderOutput(Path("."), [], [release]))
    assert settings["metrics"] == {"enableClusterQueueResources": True}


def test_sandbox_ports_stay_out_of_the_kernels_ephemeral_range(tmp_path: Path) -> None:
    """Outgoing connections take ephemeral ports; a controller told to listen on one died on a cold CI run."""
    low, high = ephemeral_port_range()
    ports = [free_port() for _ in range(40)]
    assert len(set(ports)) == len(ports), "a port was handed out twice"
    assert all(not low <= p <= high and p >= 1024 for p in ports), (ports, low, high)
    assert port_window((32768, 60999)) == range(10000, 32768)
    assert port_window((1024, 60999)) == range(61000, 65536), "a range starting low leaves only the ports above it"
    proc = tmp_path / "ip_local_port_range"
    proc.write_text("40000\t50000\n")
    assert ephemeral_port_range(proc) == (40000, 50000)
    assert ephemeral_port_range(tmp_path / "missing") == (32768, 60999)


def _deployment(namespace: str, account: str | None, *images: str) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}
    if account is not None:
        pod["serviceAccountName"] = account
    meta = {"name": "d", "namespace": namespace}
    return {"kind": "Deployment", "metadata": meta, "spec": {"template": {"spec": pod}}}


def test_each_controller_runs_as_the_service_account_of_the_deployment_that_runs_its_image() -> None:
    """The control plane gives each process the identity of the chart Deployment running the same image; LWS
    comes with the Trainer chart's subchart; a process whose image no chart runs gets no identity (not started)."""
    objects = [
        _deployment("jobset-system", "jobset-controller", "registry.k8s.io/jobset/jobset:v0.12.0"),
        _deployment("kueue-system", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.19.2"),
        _deployment("kubeflow-system", "t-cm", "ghcr.io/kubeflow/trainer/trainer-controller-manager@sha256:00"),
        _deployment("kubeflow-system", None, "mirror.local:5000/registry.k8s.io/lws/lws:v0.8.0"),
        _deployment("kube-system", "csi", "registry.k8s.io/sig-storage/nfsplugin:v4.13.4"),
    ]
    assert chart_controller_users(objects) == {
        "jobset": "system:serviceaccount:jobset-system:jobset-controller",
        "kueue": "system:serviceaccount:kueue-system:kueue-controller-manager",
        "trainer": "system:serviceaccount:kubeflow-system:t-cm",
        "lws": "system:serviceaccount:kubeflow-system:default",
    }
    assert "lws" not in chart_controller_users(objects[:3])


def test_a_release_without_its_chart_archive_is_named_with_the_fix(tmp_path: Path) -> None:
    release = {"name": "kueue", "chart": "oci://registry.k8s.io/kueue/charts/kueue", "version": "0.99.0"}
    with pytest.raises(ChartError) as err:
        chart_archive(release, tmp_path)
    message = str(err.value)
    assert "'kueue'" in message and str(tmp_path / "charts" / "kueue-0.99.0.tgz") in message
    assert "TRAINER_PLATFORM_SHARED" in message
