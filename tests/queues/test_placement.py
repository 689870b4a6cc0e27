"""The placement injection on a handcrafted runtime (the catalog's runtimes pass through the same hook)."""

from __future__ import annotations

import copy
from typing import Any

from tests.conformance import Conformance
from tests.helpers import crd_versions, stack_raw
from tests.pools_helpers import kwok_pool, stack
from trainer_infra.catalog.injections import apply_injections
from trainer_infra.stack.validate import validate

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def runtime(name: str) -> dict[str, Any]:
    def job(job_name: str, step: str, container: str) -> dict[str, Any]:
        return {
            "name": job_name,
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {"template": {"spec": {"containers": [{"name": container, "image": "pytorch/pytorch:2.7.1"}]}}},
            },
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        job("dataset-initializer", "dataset-initializer", "dataset-initializer"),
                        job("node", "trainer", "node"),
                    ]
                }
            },
        },
    }


def _jobs(rt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["name"]: j["template"]["spec"]["template"] for j in rt["spec"]["template"]["spec"]["replicatedJobs"]}


def test_runtimes_tolerate_pool_taints_and_ask_for_their_placement() -> None:
    v = validate(stack_raw("local"))
    original = runtime("torch-distributed")
    out = _jobs(apply_injections(v.serve.facts, original))
    assert original == runtime("torch-distributed"), "injections never mutate their input"
    for pod in out.values():
        assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in pod[
            "spec"
        ]["tolerations"]
    # torch-distributed has its own policy (required: block); initializers get no TAS constraint.
    assert out["node"]["metadata"]["annotations"] == {REQUIRED: "trainer-platform.io/block"}
    assert "annotations" not in out["dataset-initializer"].get("metadata", {})
    other = _jobs(apply_injections(v.serve.facts, runtime("deepspeed-distributed")))
    assert other["node"]["metadata"]["annotations"] == {PREFERRED: "trainer-platform.io/rack"}  # the default


def test_platform_policy_replaces_the_runtime_files_tas_mode_and_stays_conformant() -> None:
    v = validate(stack_raw("local"))
    rt = runtime("torch-distributed")
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    node["metadata"] = {"annotations": {PREFERRED: "kubernetes.io/hostname", "team": "x"}}
    node["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    out = apply_injections(v.serve.facts, rt)
    pod = _jobs(out)["node"]
    assert pod["metadata"]["annotations"] == {REQUIRED: "trainer-platform.io/block", "team": "x"}
    assert len(pod["spec"]["tolerations"]) == 2, "no duplicate toleration, kwok's added"
    checker = Conformance(v.config.kubernetes.version, crd_versions(v))
    assert checker.check(out) == []


def test_without_pools_or_tas_runtimes_are_left_alone() -> None:
    rt = runtime("torch-distributed")
    only: dict[str, Any] = {
        "runtimes": {"defaultResources": None}
    }  # isolate placement from the default-resources concern
    out = apply_injections(validate(stack([], **only)).serve.facts, copy.deepcopy(rt))
    for name, pod in _jobs(out).items():  # fault tolerance still applies; placement adds nothing
        before = _jobs(rt)[name]
        assert pod.get("metadata") == before.get("metadata")
        assert pod["spec"].get("tolerations") == before["spec"].get("tolerations")
    no_tas = stack([kwok_pool()], components={"kueue": {"tas": {"enabled": False}}}, **only)
    pod = _jobs(apply_injections(validate(no_tas).serve.facts, rt))["node"]
    assert "annotations" not in pod.get("metadata", {}) and pod["spec"]["tolerations"]
