"""Observability, proven: every query parsed by the pinned Prometheus parser, and every metric/label name checked
against the real controllers' /metrics
(the charts' controller pods, scraped at the addresses the installed ServiceMonitors select, over TLS with a
ServiceAccount token, as the rendered ServiceMonitors and RBAC configure it) after the scenarios ran. The alert rules
under `promtool test rules` and the dashboards' queries under `promtool check rules`: test_alert_rules.py.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.e2e.promql import analyse, check_names, parse_exposition, recorded_series, render_expressions
from trainer_infra.observability.sources import EXTERNAL
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.render import RenderOutput
from trainer_infra.sandbox.versions import VersionSet, module_dir

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]


def _tool(name: str) -> Path:
    return Builder(VersionSet.from_env()).binary(name)


def test_external_metric_names_are_defined_by_the_pinned_exporters() -> None:
    """kube-state-metrics and cAdvisor metrics cannot be scraped here: their names must at least be
    defined (as string literals) in the pinned exporter's source."""
    missing = []
    for metric, (exporter, _) in sorted(EXTERNAL.items()):
        if exporter.module is None or exporter.version is None or exporter.source_dir is None:
            continue
        folder = module_dir(exporter.module, exporter.version) / exporter.source_dir
        text = "\n".join(p.read_text() for p in folder.rglob("*.go") if not p.name.endswith("_test.go"))
        if f'"{metric}"' not in text:
            missing.append(f"{metric} not defined in {exporter.module} v{exporter.version}/{exporter.source_dir}")
    assert not missing, missing


# -- against the sandbox -----------------------------------------------------------------------------


def _observability(render: RenderOutput) -> list[Obj]:
    kinds = {"PrometheusRule", "ServiceMonitor", "ClusterRoleBinding", "ConfigMap"}
    objects = [o for o in render.objects if o["kind"] in kinds]
    if not any(o["kind"] == "PrometheusRule" for o in objects):
        pytest.fail("the e2e render has no PrometheusRule: the e2e stack must turn observability on")
    return objects


def _jobset(name: str, namespace: str, *, complete: bool) -> Obj:
    """A one-pod JobSet that kwok completes, or whose Job hits its deadline and fails the JobSet."""
    pod_labels = {"e2e.trainer-platform/complete": "true"} if complete else {}
    job_spec: Obj = {
        "template": {
            "metadata": {"labels": pod_labels},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}],
            },
        }
    }
    if not complete:
        job_spec["activeDeadlineSeconds"] = 1
        job_spec["backoffLimit"] = 0
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": job_spec}}]},
    }


def _finished(sandbox: Sandbox, name: str, namespace: str, condition: str) -> bool:
    obj = sandbox.client.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, namespace)
    return any(c["type"] == condition and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


def _token(sandbox: Sandbox, namespace: str, name: str) -> str:
    for obj in (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
    ):
        sandbox.client.apply(obj)
    review = sandbox.client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}},
    )
    return str(review["status"]["token"])


def _scrape(url: str, token: str | None) -> tuple[int, str]:
    # The controllers' certificates are self-signed: what the ServiceMonitors' insecureSkipVerify is for.
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = http.request("GET", url, headers=headers, timeout=10.0, retries=False)
    return resp.status, resp.data.decode(errors="replace")


def test_every_metric_and_label_used_exists_on_the_real_controllers(
    sandbox: Sandbox, local_render: RenderOutput, kwok_nodes: list[str]
) -> None:
    # `pulumi up` installed them (the stack has observability on: tests/e2e/installed.py)
    objects = _observability(local_render)
    binding = next(
        o for o in objects if o["kind"] == "ClusterRoleBinding" and o["roleRef"]["name"].endswith("metrics-reader")
    )
    subject = binding["subjects"][0]

    # JobSet's counters exist only once a JobSet completed / failed: make one of each (plain pods on the
    # smoke nodes, outside the team namespaces whose pod security and quotas are not the point here).
    namespace = "e2e-observability"
    sandbox.client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    stamp = str(int(time.time()))
    done, failed = f"obs-done-{stamp}", f"obs-failed-{stamp}"
    sandbox.client.create(_jobset(done, namespace, complete=True))
    sandbox.client.create(_jobset(failed, namespace, complete=False))
    wait_for(f"JobSet {done} to complete", lambda: _finished(sandbox, done, namespace, "Completed"), 90)
    wait_for(f"JobSet {failed} to fail", lambda: _finished(sandbox, failed, namespace, "Failed"), 90)

    token = _token(sandbox, subject["namespace"], subject["name"])
    stranger = _token(sandbox, subject["namespace"], "not-prometheus")
    exported: dict[str, set[str]] = {}
    for component, url in sandbox.metrics_urls().items():
        status, text = _scrape(url, token)
        assert status == 200, f"{component} /metrics with the Prometheus token: HTTP {status} {text[:300]}"
        for metric, labels in parse_exposition(text).items():
            exported.setdefault(metric, set()).update(labels)
        if component in ("jobset", "kueue"):
            # the authn/authz filter is real: no token → 401, a token without the binding → 403
            assert _scrape(url, None)[0] == 401, component
            assert _scrape(url, stranger)[0] == 403, component

    expressions = render_expressions(objects)
    analyses = analyse(_tool("promql-names"), expressions)
    result = check_names(analyses, exported, recorded_series(objects, analyses))
    assert not result.problems, "names the controllers do not export:\n" + result.report()
    # the proof covers what matters: every controller contributes at least one metric used
    used = set(result.used)
    assert {"kueue_pending_workloads", "kueue_cluster_queue_nominal_quota", "jobset_failed_total"} <= used
    assert "controller_runtime_webhook_requests_total" in used

    for name in (done, failed):
        with contextlib.suppress(ApiError):
            sandbox.client.request(
                "DELETE",
                f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}",
                params={"propagationPolicy": "Background"},
            )
