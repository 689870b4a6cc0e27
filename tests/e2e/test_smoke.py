"""Smoke tests: the sandbox's real controllers and webhooks do their job."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from trainer_infra.manifests.runtime import minimal_runtime
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, wait_for

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
NS = "default"
#: Pin smoke pods to the smoke nodes: scenario tests may have added other untainted kwok nodes.
SMOKE_SELECTOR = {"e2e.trainer-platform/pool": "smoke"}


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def running_pods(sandbox: Sandbox, selector: str, expected: int, nodes: list[str]) -> list[Obj]:
    """Wait until ``expected`` pods matching ``selector`` are Running on the given kwok nodes."""

    def check() -> list[Obj] | bool:
        pods = sandbox.client.list("v1", "Pod", NS, label_selector=selector)
        good = [p for p in pods if p["spec"].get("nodeName") in nodes and p.get("status", {}).get("phase") == "Running"]
        return good if len(good) == expected else False

    result: list[Obj] = wait_for(f"{expected} Running pods with {selector} on kwok nodes {nodes}", check, 90)
    return result


def test_hand_made_jobset_runs_on_kwok_nodes(sandbox: Sandbox, kwok_nodes: list[str]) -> None:
    """JobSet controller creates Jobs, the Job controller pods, the scheduler binds them, kwok runs them."""
    name = _unique("smoke-js")
    sandbox.client.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 2,
                        "template": {
                            "spec": {
                                "parallelism": 1,
                                "completions": 1,
                                "backoffLimit": 0,
                                "template": {
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "nodeSelector": SMOKE_SELECTOR,
                                        "containers": [
                                            {
                                                "name": "main",
                                                "image": "busybox",
                                                "resources": {"requests": {"cpu": "1"}},
                                            }
                                        ],
                                    }
                                },
                            }
                        },
                    }
                ]
            },
        }
    )
    pods = running_pods(sandbox, f"jobset.sigs.k8s.io/jobset-name={name}", 2, kwok_nodes)
    # The JobSet pod webhook (mutating) ran: it stamps the pod with JobSet labels and annotations.
    assert all(p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == "workers" for p in pods)
    jobs = sandbox.client.list("batch/v1", "Job", NS, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    assert sorted(j["metadata"]["name"] for j in jobs) == [f"{name}-workers-0", f"{name}-workers-1"]


def test_kueue_webhook_rejects_invalid_clusterqueue(sandbox: Sandbox) -> None:
    """Resource order differing from coveredResources passes the CRD schema; only Kueue's webhook refuses it."""
    cq: Obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": _unique("smoke-bad-cq")},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [
                                {"name": "memory", "nominalQuota": "10Gi"},
                                {"name": "cpu", "nominalQuota": "10"},
                            ],
                        }
                    ],
                }
            ],
        },
    }
    with pytest.raises(ApiError) as err:
        sandbox.client.create(cq)
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in err.value.message
    assert "must match the name in coveredResources" in err.value.message
    # The same queue with the order fixed is accepted (so the rejection was about the order).
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"].reverse()
    sandbox.client.create(cq, dry_run=True)


def _runtime(name: str, replicas: int = 1) -> Obj:
    container = {
        "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
        "command": ["torchrun", "train.py"],
        "resources": {"requests": {"cpu": "1"}},
    }
    return minimal_runtime(name, container, replicas, pod={"nodeSelector": SMOKE_SELECTOR})


def test_trainer_webhook_and_trainjob_becomes_jobset(sandbox: Sandbox, kwok_nodes: list[str]) -> None:
    """A valid runtime is accepted, an invalid one refused by Trainer's webhook; a TrainJob becomes a JobSet."""
    bad = _runtime(_unique("smoke-bad-rt"), replicas=2)
    with pytest.raises(ApiError) as err:
        sandbox.client.create(bad)
    assert 'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied' in err.value.message

    runtime = _runtime(_unique("smoke-rt"))
    sandbox.client.create(runtime)
    job_name = _unique("smoke-tj")
    sandbox.client.create(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": job_name, "namespace": NS},
            "spec": {
                "runtimeRef": {
                    "name": runtime["metadata"]["name"],
                    "apiGroup": "trainer.kubeflow.org",
                    "kind": "ClusterTrainingRuntime",
                },
                "trainer": {"numNodes": 2},
            },
        }
    )
    jobset = wait_for(
        f"Trainer to create JobSet {job_name}",
        lambda: sandbox.client.get("jobset.x-k8s.io/v1alpha2", "JobSet", job_name, NS),
        60,
    )
    owners = jobset["metadata"].get("ownerReferences", [])
    assert [(o["kind"], o["name"]) for o in owners] == [("TrainJob", job_name)]
    node_job = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "node")
    # numNodes from the TrainJob (2) overrides the runtime's mlPolicy (1): parallelism per node job.
    assert node_job["template"]["spec"]["parallelism"] == 2
    running_pods(sandbox, f"jobset.sigs.k8s.io/jobset-name={job_name}", 2, kwok_nodes)
    # leave no runtime behind: the session's `pulumi destroy` removes the Trainer controller before its CRDs, and a
    # runtime still holding Trainer's in-use finalizer then keeps the CRD's deletion (and the destroy) waiting
    sandbox.client.delete("trainer.kubeflow.org/v1alpha1", "TrainJob", job_name, NS)
    sandbox.client.delete("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", runtime["metadata"]["name"])
    wait_for(
        f"ClusterTrainingRuntime {runtime['metadata']['name']} to be deleted",
        lambda: (
            not [
                r
                for r in sandbox.client.list("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime")
                if r["metadata"]["name"] == runtime["metadata"]["name"]
            ]
        ),
        120,
    )
