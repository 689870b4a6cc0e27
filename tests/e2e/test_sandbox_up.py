"""``make sandbox-up`` as a newcomer meets it (issue #28 items 5, 6 and 7): the real ``pulumi up`` of the sandbox
stack on a real node, detached; ``sandbox.json``; a team member's first TrainJob, the documented command, trains on
the team's volume; ``make sandbox-down`` leaves nothing (the session's end: tests/e2e/sandbox_session.py).

First file of the sandbox session (``make e2e-sandbox``, ``E2E_SANDBOX=1``, root; CI runs it last): the training,
NetworkPolicy and runtime scenarios follow on the same sandbox. What is not real: the GPUs (advertised), the image
(the CPU torch stand-in), the export (a host directory behind a hostPath PersistentVolume of the ``existing`` class).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox, run_module
from trainer_infra.sandbox.first_job import NODES, STEP
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.platform_sandbox import GPU, TRAINER_ID, acl

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
TJ = "trainer.kubeflow.org/v1alpha1"
KUEUE = "kueue.x-k8s.io/v1beta2"


def test_sandbox_json_names_a_kubeconfig_per_member_and_the_directory_behind_each_claim(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    doc = sb.doc
    assert {n["metadata"]["name"] for n in sb.admin.list("v1", "Node")} >= {doc["node"]}

    # one kubeconfig per member, each refused outside its team
    assert len({m.namespace for m in sb.members}) >= 2, doc["members"]
    for member in sb.members:
        mine = member.client()
        mine.list(TJ, "TrainJob", member.namespace)
        other = next(m.namespace for m in sb.members if m.namespace != member.namespace)
        with pytest.raises(ApiError) as refused:
            mine.list(TJ, "TrainJob", other)
        assert refused.value.status == 403, refused.value

    # each claim is bound to its host directory: root's, others r-x, with the ACL that lets uid 1000 write (its
    # access entries raise the group bits, the ACL mask, to rwx: docs/storage.md)
    for claim in doc["claims"]:
        pvc = sb.admin.get("v1", "PersistentVolumeClaim", claim["claim"], claim["namespace"])
        assert pvc["status"]["phase"] == "Bound", pvc["status"]
        pv = sb.admin.get("v1", "PersistentVolume", pvc["spec"]["volumeName"])
        assert pv["spec"]["hostPath"]["path"] == claim["hostDirectory"]
        export = sb.host_directory(claim["namespace"], claim["claim"])
        made = export.stat()
        assert (made.st_uid, made.st_gid, made.st_mode & 0o777) == (0, 0, 0o775), oct(made.st_mode)
        assert os.getxattr(export, "system.posix_acl_access") == acl(TRAINER_ID, TRAINER_ID)
        assert os.getxattr(export, "system.posix_acl_default") == acl(TRAINER_ID, TRAINER_ID)


def test_first_job_trains_with_the_sdk_as_documented(platform_sandbox: RunningSandbox) -> None:
    """docs/sandbox.md "Your first training job", the command as documented (the SDK's ``TrainerClient().train()``
    from the host with the first member's kubeconfig: 2 nodes, torchrun over gloo), then everything asserted from
    what ran: Kueue admitted it through the team's queue onto the real node's flavor; both pods ran on the real node
    from the stand-in the mirror served, as uid 1000 under `restricted`, exit 0; every rank's loss fell; the
    checkpoint is on the host directory behind the claim, in the directory the kubelet made (``subPathExpr``); the
    quota is released."""
    sb = platform_sandbox
    admin = sb.admin
    member = sb.member(0)
    ns = member.namespace
    labels = admin.get("v1", "Namespace", ns)["metadata"]["labels"]
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels

    job, job_s = run_module("trainer_infra", "sandbox", "first-job", "--sandbox", str(sb.state / "sandbox.json"))
    sb.times["first job (SDK train → Complete → logs)"] = job_s
    assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
    found = re.search(rf"TrainJob (\S+) in {ns} as {re.escape(member.user)}: Complete", job.stdout)
    assert found, job.stdout
    name, logs = found.group(1), job.stdout

    # torchrun with gloo: every rank of every node trained as uid 1000, its loss fell
    world = {int(w) for w in re.findall(r"rank \d+ of (\d+): torch \S+ backend gloo uid 1000", logs)}
    assert len(world) == 1 and world.pop() >= NODES, logs
    losses: dict[int, list[float]] = {}
    for rank, _, loss in STEP.findall(logs):
        losses.setdefault(int(rank), []).append(float(loss))
    assert len(losses) >= NODES and all(len(v) == 10 and v[-1] < v[0] / 4 for v in losses.values()), losses
    assert "rank 0 wrote checkpoint /workspace/checkpoints/model.pt" in logs, logs

    # Kueue admitted it through the team's queue onto the flavor whose labels the real node carries
    wl = workload(admin, ns, name)
    cq = admin.get(KUEUE, "LocalQueue", member.queue, ns)["spec"]["clusterQueue"]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == cq
    flavors = {f for ps in admission["podSetAssignments"] for f in ps["flavors"].values()}
    flavor = admin.get(KUEUE, "ResourceFlavor", flavors.pop())
    real = admin.get("v1", "Node", sb.node)
    assert all(real["metadata"]["labels"].get(k) == v for k, v in flavor["spec"]["nodeLabels"].items())

    # both pods ran on the real node, from the mirror's image, as uid 1000, and exited 0
    pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    assert len(pods) == NODES, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["nodeName"] == sb.node
        status = pod["status"]["containerStatuses"][0]
        assert status["state"]["terminated"]["exitCode"] == 0, status
        sb.assert_ran_from_mirror(pod)
        assert pod["spec"]["securityContext"]["runAsUser"] == TRAINER_ID

    # the checkpoint is on the team's volume, in the TrainJob's directory the kubelet made (subPathExpr) ...
    job_dir = sb.host_directory(ns) / "jobs" / name
    checkpoint = job_dir / "checkpoints" / "model.pt"
    assert f"checkpoint: {checkpoint}" in logs
    assert checkpoint.is_file(), sorted(str(p) for p in sb.host_directory(ns).rglob("*"))
    assert checkpoint.stat().st_uid == TRAINER_ID
    assert checkpoint.read_bytes()[:2] == b"PK"  # torch.save's zip format
    # ... which only the ACL it inherited from the export lets uid 1000 write: the kubelet made it root's (group
    # root, not writable by others), and the trainer, uid 1000 without capabilities, wrote in it
    made = job_dir.stat()
    assert (made.st_uid, made.st_gid, made.st_mode & 0o002) == (0, 0, 0), (made.st_uid, made.st_gid, oct(made.st_mode))
    assert os.getxattr(job_dir, "system.posix_acl_access") == acl(TRAINER_ID, TRAINER_ID)
    assert_quota_released(admin, member, name)


# -- shared by the session's scenario files ----------------------------------------------------------------------


def workload(admin: KubeClient, ns: str, name: str) -> Obj:
    """The Kueue Workload of TrainJob ``ns/name``."""
    workloads = admin.list(KUEUE, "Workload", ns)
    return next(w for w in workloads if any(o["name"] == name for o in w["metadata"].get("ownerReferences", [])))


def gpus_reserved(admin: KubeClient, cluster_queue: str) -> int:
    usage = admin.get(KUEUE, "ClusterQueue", cluster_queue).get("status", {})
    return sum(
        int(r.get("total", "0"))
        for f in usage.get("flavorsReservation", [])
        for r in f.get("resources", [])
        if r["name"] == GPU
    )


def assert_quota_released(admin: KubeClient, member: Member, name: str) -> None:
    """The TrainJob's Workload is finished and its ClusterQueue reserves no GPU any more."""
    cq = admin.get(KUEUE, "LocalQueue", member.queue, member.namespace)["spec"]["clusterQueue"]
    wait_for(f"{cq}'s GPUs to be released", lambda: gpus_reserved(admin, cq) == 0, 60)
    wl = workload(admin, member.namespace, name)
    finished = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
    assert finished and finished[0]["status"] == "True", wl["status"]


def finished(admin: KubeClient, ns: str, name: str) -> Obj | None:
    """The TrainJob once it completed or failed."""
    job = admin.get(TJ, "TrainJob", name, ns)
    done = [c for c in job.get("status", {}).get("conditions", []) if c["type"] in ("Complete", "Failed")]
    return job if any(c["status"] == "True" for c in done) else None


def elapsed(start: float) -> float:
    return round(time.monotonic() - start, 1)
