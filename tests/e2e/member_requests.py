"""What a team member sends to the API server in the attack and deputy scenarios, and how a refusal is checked: a
small TrainJob of a team, a runtime patch of its pods, a member's TrainingRuntime, the authorizer's answer, and
that a refused TrainJob left nothing behind. Shared by the install session's files and the sandbox's."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.e2e.platform import TJ, Obj, Platform, Team, trainjob, workload_of
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient
from trainer_infra.storage.injection import VOLUME as CLAIM_VOLUME

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
RUNTIME = ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime")


def refused(client: KubeClient, obj: Obj, *needles: str) -> str:
    """Create ``obj`` (for real: a dry run would not prove nothing is left) and expect an admission refusal."""
    with pytest.raises(ApiError) as err:
        client.create(obj)
    message = err.value.message
    assert err.value.status in (403, 422), message
    for needle in needles:
        assert needle in message, f"{needle!r} not in the refusal: {message}"
    return message


def nothing_left(admin: KubeClient, ns: str, name: str) -> None:
    """A refused TrainJob left no TrainJob, JobSet or Workload behind."""
    assert name not in [t["metadata"]["name"] for t in admin.list(*TJ, ns)]
    assert name not in [j["metadata"]["name"] for j in admin.list(*JOBSET, ns)]
    assert workload_of(admin, ns, name) is None


def patched(job: Obj, pod: Obj, replicated_job: str = "node") -> Obj:
    """``job`` with a runtime patch of one replicated job's pod spec, as the SDK's options write it."""
    out = copy.deepcopy(job)
    rj = {"name": replicated_job, "template": {"spec": {"template": {"spec": pod}}}}
    out["spec"]["runtimePatches"] = [
        {"manager": "example.com/member", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rj]}}}}
    ]
    return out


def claim_patch(claim: str, mount_path: str = "/data") -> Obj:
    """Attack 1's honest variant: a runtime patch mounting the team's whole claim ``claim`` into the trainer, as the
    volume the catalog's runtimes already mount it as (a second volume of the same claim never mounts on a real
    kubelet: the pod stays ``ContainerCreating`` with ``unmounted volumes=[data]``, kubernetes#132921; seen on the
    sandbox's node)."""
    return {
        "volumes": [{"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": claim}}],
        "containers": [{"name": "node", "volumeMounts": [{"name": CLAIM_VOLUME, "mountPath": mount_path}]}],
    }


def can(
    client: KubeClient, verb: str, resource: str, group: str, ns: str | None = None, name: str | None = None
) -> bool:
    """What the API server's authorizer answers ``client`` (SelfSubjectAccessReview); ``resource`` may name a
    subresource (``pods/log``)."""
    base, _, sub = resource.partition("/")
    attrs = {"group": group, "resource": base, "verb": verb, **({"name": name} if name else {})}
    if sub:
        attrs["subresource"] = sub
    if ns:
        attrs["namespace"] = ns
    review = client.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        },
    )
    return bool(review["status"]["allowed"])


def team_claim(platform: Platform, team: Team) -> str:
    claims = [
        c["metadata"]["name"]
        for c in platform.render.of_kind("PersistentVolumeClaim")
        if c["metadata"]["namespace"] == team.namespace
    ]
    assert claims, f"render has no claim in {team.namespace}"
    return str(claims[0])


def member(sandbox: Sandbox, team: Team) -> KubeClient:
    return sandbox.user_client(team.user, team.groups)


def small(name: str, team: Team, **kw: Any) -> Obj:
    return trainjob(name, team.namespace, gpus=1, nodes=1, queue=team.queue, cpu="1", **kw)


def duration_seconds(duration: str) -> float:
    """A Go duration such as Kueue's `10m` or `1h30m`, in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    total, number = 0.0, ""
    for ch in duration:
        if ch.isdigit() or ch == ".":
            number += ch
        else:
            total += float(number) * units[ch]
            number = ""
    return total


def member_runtime(source: Obj, ns: str, name: str, pod_changes: Obj) -> Obj:
    """A catalog runtime (``source``) as a member's namespaced TrainingRuntime, with ``pod_changes`` on its pods."""
    spec = copy.deepcopy(source["spec"])
    for rj in spec["template"]["spec"]["replicatedJobs"]:
        rj["template"]["spec"]["template"]["spec"].update(copy.deepcopy(pod_changes))
    labels = {k: v for k, v in source["metadata"].get("labels", {}).items() if k.startswith("trainer.kubeflow.org/")}
    return {
        "apiVersion": RUNTIME[0],
        "kind": RUNTIME[1],
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }
