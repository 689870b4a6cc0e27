"""GKE queued provisioning (DWS flex-start) on the real Kueue: a TrainJob on a pool whose nodes exist only once
requested waits on its ProvisioningRequest; the test plays the cluster autoscaler.

The objects are the stack's own: the `gke` example stack rendered with only its queued-provisioning pool (`a100`)
and one team with quota there, so every Kueue object (ResourceFlavor with its Topology, ProvisioningRequestConfig,
AdmissionCheck, ClusterQueue with `admissionChecksStrategy`, LocalQueue) is what `pulumi up` would create. Kueue runs
as its chart's ServiceAccount with only the chart's RBAC. The ProvisioningRequest CRD (the version Kueue's go.mod
pins) is installed before Kueue starts: Kueue sets its provisioning controller up only if the API serves the kind
then (cmd/kueue/main.go `setupControllers`). The nodes the "autoscaler" brings are kwok nodes carrying what the
plan says the pool's nodes carry (labels, taints, allocatable).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e.platform import TJ, WL, trainjob, workload_of
from tests.helpers import stack_raw
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.upstream import autoscaler
from trainer_infra.core.upstream.gke import QUEUED_PROVISIONING_CLASS
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.queues.derive import provisioning_check_name
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import KubeClient, wait_for
from trainer_infra.sandbox.probes import has_condition
from trainer_infra.sandbox.render import RenderOutput, apply_render, kueue_settings, render_stack
from trainer_infra.sandbox.versions import VersionSet, provisioning_request_crd
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.e2e

POOL = "a100"  # the gke example stack's queued-provisioning pool
TEAM = "nlp"
PR = (autoscaler.PROVISIONING_REQUEST_API, "ProvisioningRequest")
KUEUE = "kueue.x-k8s.io/v1beta2"
MEASURED: dict[str, float] = {}


@dataclass
class Cluster:
    sandbox: Sandbox
    render: RenderOutput
    pool: ResolvedPool
    check: str

    @property
    def client(self) -> KubeClient:
        return self.sandbox.client


def _stack_variant() -> dict[str, Any]:
    """The example stack's queued-provisioning pool alone, and a team with two of its nodes' worth of GPUs."""
    pools = [p for p in stack_raw("gke")["nodePools"] if p["name"] == POOL]
    return {"nodePools": pools, "teams": [{"name": TEAM, "quota": {POOL: {"gpus": 16}}}]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("provreq")
    started = time.monotonic()
    variant = _stack_variant()
    render = render_stack("gke", tmp / "render", variant)
    [pool] = [p for p in validate({**stack_raw("gke"), **variant}).pools if p.name == POOL]
    assert pool.provisioning is not None, "the example's a100 pool must use queued provisioning"
    MEASURED["render"] = time.monotonic() - started
    versions = VersionSet.from_env()
    sandbox = Sandbox(
        tmp / "cp",
        versions,
        kueue_settings=kueue_settings(render),
        helm_releases=render.helm_releases,
        extra_crds=[provisioning_request_crd(versions.kueue)],
    )
    sandbox.start()
    try:
        MEASURED["control plane"] = time.monotonic() - started - MEASURED["render"]
        apply_render(sandbox, tmp / "render")
        check = provisioning_check_name(POOL)
        client = sandbox.client
        for kind, name in (("AdmissionCheck", check), ("ClusterQueue", TEAM)):
            wait_for(f"{kind} {name} Active", functools.partial(_active, client, kind, name), 60)
        MEASURED["ready"] = time.monotonic() - started
        yield Cluster(sandbox, render, pool, check)
    finally:
        sandbox.stop()
        print("\nprovisioning-request e2e (s): " + ", ".join(f"{k}={v:.1f}" for k, v in MEASURED.items()))


def _active(client: KubeClient, kind: str, name: str) -> bool:
    return has_condition(client.get(KUEUE, kind, name), "Active")


def _request_of(client: KubeClient, workload: str) -> dict[str, Any] | None:
    """The ProvisioningRequest Kueue made for a Workload (owned by it)."""
    for pr in client.list(*PR, TEAM):
        if any(o.get("name") == workload for o in pr["metadata"].get("ownerReferences", [])):
            return pr
    return None


def _check_state(wl: dict[str, Any], check: str) -> dict[str, Any]:
    return next(c for c in wl.get("status", {}).get("admissionChecks", []) if c["name"] == check)


def _answer(client: KubeClient, pr: dict[str, Any], **conditions: str) -> None:
    """What the cluster autoscaler does: set the request's conditions (status subresource)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "status": {
            "conditions": [
                {"type": kind, "status": "True", "reason": reason, "message": reason, "lastTransitionTime": now}
                for kind, reason in conditions.items()
            ]
        }
    }
    path = client.path(*PR, TEAM, pr["metadata"]["name"]) + "/status"
    client.request("PATCH", path, body, content_type="application/merge-patch+json")


def _submit_and_wait_for_request(c: Cluster, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Submit a one-node TrainJob through the team's queue; Kueue reserves quota on the pool's flavor and asks for
    the nodes instead of admitting."""
    c.client.apply(trainjob(name, TEAM, gpus=8, nodes=1, queue="default"))
    wl = wait_for(f"Workload of {name}", lambda: workload_of(c.client, TEAM, name), 60)
    wl_name = wl["metadata"]["name"]
    pr: dict[str, Any] = wait_for(f"the ProvisioningRequest of {wl_name}", lambda: _request_of(c.client, wl_name), 60)
    wl = c.client.get(*WL, wl_name, TEAM)
    assert has_condition(wl, "QuotaReserved") and not has_condition(wl, "Admitted")
    assert _check_state(wl, c.check)["state"] == "Pending"
    assert c.client.list("v1", "Pod", TEAM, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}") == []
    return wl, pr


def test_job_waits_on_its_request_and_is_admitted_once_provisioned(cluster: Cluster) -> None:
    c = cluster
    mark = time.monotonic()
    wl, pr = _submit_and_wait_for_request(c, "granted")
    assert pr["spec"]["provisioningClassName"] == QUEUED_PROVISIONING_CLASS
    [podset] = pr["spec"]["podSets"]
    assert podset["count"] == 1
    template = c.client.get("v1", "PodTemplate", podset["podTemplateRef"]["name"], TEAM)
    [container] = [x for x in template["template"]["spec"]["containers"] if x["name"] == "node"]
    assert container["resources"]["requests"][c.pool.accelerator_resource] == "8"

    # nothing happens until the autoscaler answers: no admission, no pods
    time.sleep(3)
    assert not has_condition(c.client.get(*WL, wl["metadata"]["name"], TEAM), "Admitted")

    # the autoscaler brings one node of the pool (the plan's labels, taints, allocatable), then says Provisioned
    node = "a100-provisioned-0"
    capacity = {res: format_amount(res, amount) for res, amount in c.pool.per_node.items()}
    c.sandbox.create_kwok_node(
        node, labels=c.pool.node_labels, capacity=capacity, taints=[t.as_k8s() for t in c.pool.taints]
    )
    _answer(c.client, pr, **{autoscaler.ACCEPTED: "Accepted", autoscaler.PROVISIONED: "Provisioned"})

    wl_name = wl["metadata"]["name"]

    def admitted() -> dict[str, Any] | None:
        w = c.client.get(*WL, wl_name, TEAM)
        return w if has_condition(w, "Admitted") else None

    wl = wait_for("Kueue to admit the job once its request is Provisioned", admitted, 60)
    state = _check_state(wl, c.check)
    assert state["state"] == "Ready"
    [update] = state["podSetUpdates"]
    assert update["annotations"][autoscaler.CONSUME_ANNOTATION] == pr["metadata"]["name"]
    assert update["annotations"][autoscaler.CLASS_ANNOTATION] == QUEUED_PROVISIONING_CLASS
    # topology (TAS) is assigned only now, on the node that exists (Kueue's DelayedTopologyRequest)
    [assignment] = wl["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"] is not None

    def running() -> list[dict[str, Any]] | None:
        pods = c.client.list("v1", "Pod", TEAM, label_selector="jobset.sigs.k8s.io/jobset-name=granted")
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName") == node]
        return ok or None

    [pod] = wait_for("the job's pod to run on the provisioned node", running, 60)
    assert pod["metadata"]["annotations"][autoscaler.CONSUME_ANNOTATION] == pr["metadata"]["name"]
    MEASURED["granted"] = time.monotonic() - mark


def test_failed_request_requeues_the_job(cluster: Cluster) -> None:
    """Kueue 0.19.2 pkg/controller/admissionchecks/provisioning/controller.go `syncCheckStates`: a Failed request
    within the ProvisioningRequestConfig's retryStrategy (default backoffLimitCount 3, backoffBaseSeconds 60) turns
    the check to Retry; pkg/controller/core/workload_controller.go evicts the Workload (reason AdmissionCheck), which
    releases its quota and resets the check to Pending with retryCount 1 (pkg/workload/evict/evict.go
    `resetChecksOnEviction`); the Workload stays active and goes back to the queue for a new request. The eviction
    is read from what persists (`schedulingStats.evictions`, the check's retryCount): the Evicted condition itself
    lasts only until the requeue. It is never admitted, no pod is created."""
    c = cluster
    mark = time.monotonic()
    wl, pr = _submit_and_wait_for_request(c, "refused")
    _answer(c.client, pr, **{autoscaler.FAILED: "CapacityUnavailable"})
    wl_name = wl["metadata"]["name"]
    seen_admitted = []

    def evicted() -> dict[str, Any] | None:
        w = c.client.get(*WL, wl_name, TEAM)
        if has_condition(w, "Admitted"):
            seen_admitted.append(w)
        stats = w.get("status", {}).get("schedulingStats", {}).get("evictions", [])
        retried = _check_state(w, c.check).get("retryCount", 0) >= 1
        return w if retried and any(e["reason"] == "AdmissionCheck" and e["count"] >= 1 for e in stats) else None

    wl = wait_for("Kueue to evict the Workload after the Failed request", evicted, 150)
    MEASURED["failed: evicted after"] = time.monotonic() - mark
    assert not seen_admitted and not has_condition(wl, "Admitted")
    assert wl["spec"].get("active", True) is True, "a failed request within the retry limit must not deactivate"
    assert c.client.list("v1", "Pod", TEAM, label_selector="jobset.sigs.k8s.io/jobset-name=refused") == []
    trainjob_obj = c.client.get(*TJ, "refused", TEAM)
    assert trainjob_obj["spec"].get("suspend") is True
    MEASURED["failed"] = time.monotonic() - mark
