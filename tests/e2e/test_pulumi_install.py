"""The real install path, first half: `pulumi preview` and `pulumi up` of the local stack (with observability on,
``tests/e2e/installed.py``) on an empty cluster, with the real engine, provider and charts.

The session's platform is this install: the scenario files (smoke, scenarios, attacks, deputies, migrate,
observability) run next on what this `up` installed, then test_pulumi.py's day-two steps (a second up, an
upgrade, drift, the policy pack, secrets, destroy). tests/e2e/run.py runs them in that order in one session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.installed import Deployed
from tests.e2e.pulumi_steps import kind_name
from trainer_infra.core.images import mirror_image
from trainer_infra.sandbox.chart_sandbox import REAL_NODE
from trainer_infra.sandbox.kube import ApiError
from trainer_infra.sandbox.node import MIRROR

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
#: chart Secrets that the controllers fill with their webhook certificates at run time
CERT_SECRETS = (
    ("jobset-system", "jobset-webhook-server-cert"),
    ("kubeflow-system", "kubeflow-trainer-webhook-cert"),
    ("kubeflow-system", "lws-webhook-server-cert"),  # the local stack's data cache installs LWS
)


def test_preview_on_an_empty_cluster_lists_every_object(deployed: Deployed) -> None:
    result = deployed.timed("preview (local, empty cluster)", deployed.project.preview("--json"))
    steps = result.steps()
    assert steps and {s["op"] for s in steps} == {"create"}, {s["op"] for s in steps}
    planned = {kind_name(s) for s in steps}
    # every object of the offline render is in the engine's plan ...
    missing = [
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in deployed.render.objects
        if (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) not in planned
    ]
    assert not missing, f"render objects absent from `pulumi preview`: {missing[:20]}"
    # ... and so is every chart object (the offline render only lists the releases)
    deployments = {(ns, name) for kind, ns, name in planned if kind == "Deployment"}
    for ns in ("jobset-system", "kueue-system", "kubeflow-system"):
        assert any(d_ns == ns for d_ns, _ in deployments), f"no chart Deployment in {ns}: {sorted(deployments)}"
    kinds = {kind for kind, _, _ in planned}
    assert {"CustomResourceDefinition", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} <= kinds
    # the charts' workloads carry the order after every CRD of their chart (platform/crd_order.py, run by Helm)
    planned_objects = [(s["urn"], s["newState"].get("inputs") or {}) for s in steps if s.get("newState")]
    wrong = _unordered(
        planned_objects,
        lambda _, inputs, crds: (
            sorted(inputs["metadata"].get("annotations", {}).get(DEPENDS_ON, "").split(","))
            == sorted(f"apiextensions.k8s.io/CustomResourceDefinition/{name}" for name in crds.values())
        ),
    )
    assert not wrong, f"chart workloads not annotated with every CRD of their chart: {wrong}"
    # the charts came through the product's air-gap path: the stack's mirror, nothing else
    pulled = deployed.registry.pulled()
    expected = {f"{deployed.registry.mirror}/{_upstream_path(r)}:{r['version']}" for r in deployed.render.helm_releases}
    assert expected <= {p for p in pulled}, (sorted(expected), pulled)


DEPENDS_ON = "config.kubernetes.io/depends-on"
CHART_CHILD = "kubernetes:helm.sh/v4:Chart$"


def _unordered(objects: list[tuple[str, Obj]], ordered: Callable[[str, Obj, dict[str, str]], bool]) -> list[str]:
    """The chart workloads (Deployment, StatefulSet, DaemonSet) that ``ordered(urn, inputs, crds)`` finds not after
    every CRD of their own chart (``crds``: URN → name); fails when a chart with CRDs has no workload."""
    charts: dict[str, dict[str, str]] = {}
    workloads: dict[str, list[tuple[str, Obj]]] = {}
    for urn, inputs in objects:
        if CHART_CHILD not in urn:
            continue
        release = urn.rsplit("::", 1)[1].split(":", 1)[0]
        if inputs.get("kind") == "CustomResourceDefinition":
            charts.setdefault(release, {})[urn] = inputs["metadata"]["name"]
        elif inputs.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            workloads.setdefault(release, []).append((urn, inputs))
    assert {"jobset", "kueue", "trainer"} <= set(charts), sorted(charts)
    assert all(workloads.get(release) for release in charts), {r: len(workloads.get(r, [])) for r in charts}
    return [
        urn for release, crds in charts.items() for urn, inputs in workloads[release] if not ordered(urn, inputs, crds)
    ]


def _upstream_path(release: Obj) -> str:
    """Where a release's chart lives upstream, without the scheme: the path it has under the mirror."""
    if release.get("repository"):
        return f"{str(release['repository']).removeprefix('https://').rstrip('/')}/{release['chart']}"
    return str(release["chart"]).removeprefix("oci://")


def test_controllers_have_no_cpu_limit_in_the_rendered_charts(deployed: Deployed) -> None:
    """The project sets a memory limit only; the charts' own limits.cpu must not survive Helm's merge."""
    result = deployed.project.preview("--json")
    found = {}
    for step in result.steps():
        kind, ns, name = kind_name(step)
        if kind != "Deployment" or ns not in ("jobset-system", "kueue-system", "kubeflow-system"):
            continue
        for c in step["newState"]["inputs"]["spec"]["template"]["spec"]["containers"]:
            found[f"{ns}/{name}/{c['name']}"] = (c.get("resources") or {}).get("limits") or {}
    assert found
    with_cpu = {k: v for k, v in found.items() if "cpu" in v}
    assert not with_cpu, f"chart containers keep a cpu limit: {with_cpu}"
    assert all("memory" in v for v in found.values()), found


def cert_secrets(deployed: Deployed) -> dict[tuple[str, str], Obj]:
    return {(ns, n): deployed.sandbox.client.get("v1", "Secret", n, ns) for ns, n in CERT_SECRETS}


def webhook_rejects_invalid_cluster_queue(deployed: Deployed) -> None:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "e2e-invalid"},
        "spec": {"cohortName": "Not_A_DNS_Label", "resourceGroups": []},
    }
    with pytest.raises(ApiError) as err:
        deployed.sandbox.client.create(bad, dry_run=True)
    assert "failed calling webhook" not in err.value.message, err.value.message


def test_up_installs_the_platform_from_the_charts(deployed: Deployed) -> None:
    deployed.install()
    client = deployed.sandbox.client
    # the controllers serving the cluster are the charts' pods, containers on the real node from the images the
    # mirror served under the charts' references (the images the e2e made from the pinned sources)
    published = deployed.sandbox.published
    seen = set()
    for pod in deployed.sandbox.controller_pods():
        assert pod["spec"]["nodeName"] == REAL_NODE, (pod["metadata"]["name"], pod["spec"].get("nodeName"))
        for status in pod["status"]["containerStatuses"]:
            upstream = next(u for u in published if status["image"] == mirror_image(u, MIRROR))
            assert status["imageID"] == f"{status['image'].rsplit(':', 1)[0]}@{published[upstream]}", status
            seen.add(upstream)
    assert seen == set(published), f"published but never run: {sorted(set(published) - seen)}"
    # webhooks are the charts' (Service references, caBundle injected by the controllers), reached via Services
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for cfg in client.list("admissionregistration.k8s.io/v1", kind):
            for hook in cfg.get("webhooks", []):
                assert "service" in hook["clientConfig"], (cfg["metadata"]["name"], hook["clientConfig"])
                assert hook["clientConfig"].get("caBundle"), f"{cfg['metadata']['name']}: no caBundle injected"
    webhook_rejects_invalid_cluster_queue(deployed)
    for (ns, name), secret in cert_secrets(deployed).items():
        assert secret.get("data", {}).get("tls.crt"), f"{ns}/{name} has no certificate"
    # the controllers own the certificates: Pulumi applied the chart's placeholders without `data`
    # (else a refreshed preview, the drift check, proposes replacing them with the controllers' content)
    state = deployed.project.export()["deployment"]["resources"]
    applied = {
        (r["inputs"]["metadata"].get("namespace"), r["inputs"]["metadata"]["name"]): r["inputs"]
        for r in state
        if r["type"] == "kubernetes:core/v1:Secret"
    }
    for key in CERT_SECRETS:
        assert "data" not in applied[key], f"{key}: the chart's empty certificate was applied by Pulumi"
    # in the engine's graph each chart workload depends on every CRD of its chart: created after them
    needs = {r["urn"]: set(r.get("dependencies") or []) for r in state}
    wrong = _unordered([(r["urn"], r.get("inputs") or {}) for r in state], lambda urn, _, crds: set(crds) <= needs[urn])
    assert not wrong, f"chart workloads that the engine may create before their chart's CRDs: {wrong}"
