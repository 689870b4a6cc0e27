"""The bounds a hostile member meets on the real node (tenancy.images, tenancy.ephemeralStorage), as the team members
sandbox.json names, asserted from what happened: the API server's refusal naming the allowed registries, and the
kubelet's eviction of a job that fills the node's disk past its team's default limit, with the other team's running
job untouched and the quota given back."""

from __future__ import annotations

import time
from typing import Any

from tests.e2e.member_requests import nothing_left, refused
from tests.e2e.platform import CQ, GPU, workload_of
from tests.e2e.sandbox_session import SANDBOX_MARKS, RunningSandbox
from tests.e2e.test_sandbox_network import script_trainjob
from tests.e2e.test_sandbox_up import TJ, finished
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.platform_sandbox import EPHEMERAL_LIMIT

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
#: writes past the team's default limit into HOME (an emptyDir on the node's disk), 64 MiB at a time
FILL = """
import os, time
with open(os.path.join(os.environ['HOME'], 'fill'), 'wb') as out:
    for i in range(64):
        out.write(os.urandom(1 << 20) * 64)
        out.flush()
        print(f'wrote {(i + 1) * 64} MiB', flush=True)
        time.sleep(0.2)
time.sleep(600)
"""
SLEEP = "import time; print('running', flush=True); time.sleep(90); print('done', flush=True)"


def _jobset_pods(sb: RunningSandbox, ns: str, name: str) -> list[Obj]:
    return sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")


def _gpus_reserved(sb: RunningSandbox, cluster_queue: str) -> int:
    usage = sb.admin.get(*CQ, cluster_queue).get("status", {}).get("flavorsReservation", [])
    return sum(int(r["total"]) for f in usage for r in f["resources"] if r["name"] == GPU)


def test_an_image_from_outside_the_allowed_registries_is_refused_naming_them(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    who = sb.member(1)
    job = script_trainjob(who, "miner", 1, "print('mining')", {})
    job["spec"]["trainer"]["image"] = "docker.io/attacker/miner:latest"
    message = refused(who.client(), job, "does not allow", MIRROR, "tenancy.images.allowedRegistries")
    print(f"\n[limits] {message}", flush=True)
    nothing_left(sb.admin, who.namespace, "miner")


def test_a_job_filling_the_node_disk_is_evicted_and_the_other_teams_job_runs_on(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    other, who = sb.member(0), sb.member(1)
    began = time.monotonic()
    other.client().create(script_trainjob(other, "neighbour", 1, SLEEP, {}))
    wait_for(
        "the other team's job to run",
        lambda: any(p["status"].get("phase") == "Running" for p in _jobset_pods(sb, other.namespace, "neighbour")),
        300,
    )
    who.client().create(script_trainjob(who, "filler", 1, FILL, {}))

    def evicted() -> Obj | None:
        # the member reads its own pods: what the kubelet said is theirs to see
        pods = who.client().list("v1", "Pod", who.namespace, label_selector="jobset.sigs.k8s.io/jobset-name=filler")
        return next((p for p in pods if p["status"].get("reason") == "Evicted"), None)

    pod = wait_for("the kubelet to evict the job filling the disk", evicted, 300)
    message = pod["status"].get("message", "")
    print(f"\n[limits] {who.namespace}/filler: {message}", flush=True)
    assert "ephemeral local storage" in message and EPHEMERAL_LIMIT in message, message
    assert pod["spec"]["nodeName"] == sb.node

    done = wait_for("the evicted job to fail", lambda: finished(sb.admin, who.namespace, "filler"), 300)
    conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    assert conditions.get("Failed") == "True", done["status"]

    def workload_finished() -> Obj | None:
        # Kueue marks the Workload finished after the TrainJob's Failed condition, a moment later
        wl = workload_of(sb.admin, who.namespace, "filler") or {}
        done = any(
            c["type"] == "Finished" and c["status"] == "True" for c in wl.get("status", {}).get("conditions", [])
        )
        return wl if done else None

    wl = wait_for("Kueue to finish the evicted job's Workload", workload_finished, 60)
    cluster_queue = wl["status"]["admission"]["clusterQueue"]
    wait_for("the evicted job's GPUs to be free", lambda: _gpus_reserved(sb, cluster_queue) == 0, 120)

    # the neighbour on the same node was never disturbed: one pod, never restarted, and it completes
    neighbour = wait_for(
        "the other team's job to finish", lambda: finished(sb.admin, other.namespace, "neighbour"), 300
    )
    assert {c["type"]: c["status"] for c in neighbour["status"]["conditions"]}.get("Complete") == "True"
    pods = _jobset_pods(sb, other.namespace, "neighbour")
    assert len(pods) == 1 and pods[0]["status"]["containerStatuses"][0]["restartCount"] == 0, pods
    ready = [c for c in sb.admin.get("v1", "Node", sb.node)["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True", ready
    for ns, name in ((who.namespace, "filler"), (other.namespace, "neighbour")):
        sb.admin.delete(TJ, "TrainJob", name, ns)
    sb.times["limits: disk filler evicted, neighbour ran on"] = round(time.monotonic() - began, 1)
