"""A job's directory is the job's: no member input steers the team claim's `jobs/<trainjob>` mount to another job's
directory (`TRAIN_JOB_NAME` in the trainer's or a patch's env, a patch's mount at the mount path), while the served
runtimes, their JobSets and pods pass. The policies are the plan's, for a stack with storage; CEL evaluated here,
the sandbox e2e submits the attack for real (tests/e2e/test_sandbox_preemption.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.helpers import MINIMAL, plan_of
from tests.tenancy import cel_admission
from trainer_infra.tenancy.admission.policy import policy_name

Obj = dict[str, Any]
RAW: Obj = {
    **MINIMAL,
    "storage": {"efs": {"fileSystemId": "fs-1"}},
    "teams": [{"name": "nlp", "storage": {"size": "2Ti"}, "members": {"users": ["alice@example.com"]}}],
}


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return [o.manifest for o in plan_of(RAW).objects]


def _policy(objects: list[Obj], kind: str) -> Obj:
    return next(
        o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == policy_name(kind)
    )


def _refusals(objects: list[Obj], kind: str, obj: Obj) -> list[str]:
    ns = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == "nlp")
    return cel_admission.refusals(
        _policy(objects, kind),
        obj,
        namespace="nlp",
        namespace_annotations=ns["metadata"].get("annotations", {}),
        namespace_labels=ns["metadata"].get("labels", {}),
    )


def _runtime(objects: list[Obj], name: str = "torch-distributed") -> Obj:
    return next(o for o in objects if o["kind"] == "ClusterTrainingRuntime" and o["metadata"]["name"] == name)


def _trainjob(trainer_env: list[Obj] | None = None, patch_pod: Obj | None = None) -> Obj:
    spec: Obj = {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}}
    if trainer_env is not None:
        spec["trainer"]["env"] = trainer_env
    if patch_pod is not None:
        jobs = [{"name": "node", "template": {"spec": {"template": {"spec": patch_pod}}}}]
        spec["runtimePatches"] = [
            {"manager": "example.com/me", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        ]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "thief", "namespace": "nlp", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": spec,
    }


def _jobset(runtime: Obj) -> Obj:
    return {
        "metadata": {"name": "mine"},
        "spec": {**copy.deepcopy(runtime["spec"]["template"]["spec"]), "suspend": True},
    }


def _node(jobset: Obj) -> Obj:
    job = next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node")
    container: Obj = job["template"]["spec"]["template"]["spec"]["containers"][0]
    return container


def test_the_served_runtimes_their_jobsets_and_an_honest_trainjob_pass(objects: list[Obj]) -> None:
    for rt in (o for o in objects if o["kind"] == "ClusterTrainingRuntime"):
        assert _refusals(objects, "JobSet", _jobset(rt)) == [], rt["metadata"]["name"]
    assert _refusals(objects, "TrainJob", _trainjob([{"name": "EPOCHS", "value": "3"}])) == []
    # the claim mounted elsewhere, on purpose, is the team's own business
    elsewhere = {"containers": [{"name": "node", "volumeMounts": [{"name": "initializer", "mountPath": "/team"}]}]}
    assert _refusals(objects, "TrainJob", _trainjob(patch_pod=elsewhere)) == []


def test_a_trainjob_naming_another_jobs_directory_in_its_env_is_refused(objects: list[Obj]) -> None:
    """The attack of the issue: `TRAIN_JOB_NAME` set to another job's name in `spec.trainer.env`."""
    refused = _refusals(objects, "TrainJob", _trainjob([{"name": "TRAIN_JOB_NAME", "value": "victim"}]))
    assert refused and "spec.trainer.env sets TRAIN_JOB_NAME" in refused[0], refused
    # ... from anywhere: a ConfigMap, a field of its own, a runtime patch's env
    for env in (
        {"name": "TRAIN_JOB_NAME", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        {"name": "TRAIN_JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['mine']"}}},
    ):
        patch = {"containers": [{"name": "node", "env": [env]}]}
        refused = _refusals(objects, "TrainJob", _trainjob(patch_pod=patch))
        assert any("sets TRAIN_JOB_NAME in a container's env" in r for r in refused), (env, refused)


@pytest.mark.parametrize(
    "mount",
    [
        {"name": "initializer", "mountPath": "/workspace", "subPath": "jobs/victim"},
        {"name": "initializer", "mountPath": "/workspace/", "subPathExpr": "jobs/$(OTHER)"},
        {"name": "scratch", "mountPath": "/workspace"},
    ],
    ids=["subPath", "subPathExpr", "another volume"],
)
def test_a_runtime_patch_mounting_at_the_job_directory_is_refused(objects: list[Obj], mount: Obj) -> None:
    patch = {"containers": [{"name": "node", "volumeMounts": [mount]}]}
    refused = _refusals(objects, "TrainJob", _trainjob(patch_pod=patch))
    assert any("mounts something at /workspace other than the job's own directory" in r for r in refused), refused


def test_a_runtime_patch_repeating_the_claim_mount_merges_and_passes(objects: list[Obj]) -> None:
    """What `trainer-infra migrate` writes for a v1 job's claim mount at /workspace: it merges into the runtime's mount
    by mountPath and keeps the job's own sub-path."""
    patch = {"containers": [{"name": "node", "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}]}
    refused = _refusals(objects, "TrainJob", _trainjob(patch_pod=patch))
    assert not any("mounts something at /workspace" in r for r in refused), refused


def test_a_jobset_whose_job_directory_is_steered_is_refused_whatever_the_route(objects: list[Obj]) -> None:
    """The backstop: what Trainer would make of a steering input (its env upsert, a merged mount) is refused in
    the JobSet it creates, so no pod ever mounts another job's directory."""
    honest = _jobset(_runtime(objects))
    env = copy.deepcopy(honest)
    name_env = next(e for e in _node(env)["env"] if e["name"] == "TRAIN_JOB_NAME")
    name_env.clear()
    name_env.update({"name": "TRAIN_JOB_NAME", "value": "victim"})
    assert any("sets TRAIN_JOB_NAME" in r for r in _refusals(objects, "JobSet", env))

    literal = copy.deepcopy(honest)
    mount = next(m for m in _node(literal)["volumeMounts"] if m["mountPath"] == "/workspace")
    del mount["subPathExpr"]
    mount["subPath"] = "jobs/victim"
    assert any("other than the job's own directory" in r for r in _refusals(objects, "JobSet", literal))

    # the injected name env gone, a ConfigMap's TRAIN_JOB_NAME (envFrom) would name the directory
    unnamed = copy.deepcopy(honest)
    _node(unnamed)["env"] = [e for e in _node(unnamed)["env"] if e["name"] != "TRAIN_JOB_NAME"]
    assert any("other than the job's own directory" in r for r in _refusals(objects, "JobSet", unnamed))
