"""Drive the real `kubeflow` SDK (TrainerClient, Kubernetes backend) against a recording fake API server.

The fake sits under the official kubernetes client, at the HTTP layer (`RESTClientObject.request`), so
every request the SDK code really makes — including its async threads and log streaming — is seen as
(method, URL). It answers with small, valid objects so the SDK walks its normal paths. The resulting
list of calls comes from the SDK's code, not from a hand-kept list.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock
from urllib.parse import urlencode, urlparse

from kubernetes import client
from kubernetes.client import rest

RUNTIME = "torch-distributed"
JOB = "job-1"
POD = "job-1-node-0-0-abcde"
CREATED = "2026-01-01T00:00:00Z"


def _runtime() -> dict[str, Any]:
    node = {
        "name": "node",
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.9.1"}]}}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [node]}}},
    }


def _trainjob(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": JOB, "namespace": namespace, "creationTimestamp": CREATED},
        "spec": {"runtimeRef": {"name": RUNTIME}},
        "status": {
            "conditions": [
                {"type": "Complete", "status": "True", "reason": "Done", "message": "", "lastTransitionTime": CREATED}
            ]
        },
    }


def _pod(namespace: str) -> dict[str, Any]:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": JOB,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    return {
        "metadata": {"name": POD, "namespace": namespace, "labels": labels, "creationTimestamp": CREATED},
        "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.9.1"}]},
        "status": {"phase": "Succeeded"},
    }


def _event(namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "e1", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": POD},
        "reason": "Started",
        "message": "started",
        "firstTimestamp": CREATED,
    }


class _Response:
    """Enough of a urllib3 response for the kubernetes client (preloaded and streamed)."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = "OK" if status < 400 else "Not Found"
        self.data = (body if isinstance(body, str) else json.dumps(body)).encode()

    def getheaders(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.getheaders().get(name.lower(), default)

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.data

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


def _answer(method: str, path: str) -> tuple[int, Any]:
    parts = [p for p in path.split("/") if p]
    ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
    last = parts[-1]
    if last == "kubeflow-trainer-public":
        return 200, {"metadata": {"name": last}, "data": {"kubeflow_trainer_version": "2.2.1"}}
    if last == "log":
        return 200, "step 1 loss 0.5\nstep 2 loss 0.4"
    if "trainingruntimes" in parts:
        return (200, {"items": []}) if last == "trainingruntimes" else (404, {"kind": "Status", "code": 404})
    if "clustertrainingruntimes" in parts:
        return 200, ({"items": [_runtime()]} if last == "clustertrainingruntimes" else _runtime())
    if "trainjobs" in parts:
        if method == "DELETE":
            return 200, {"kind": "Status", "status": "Success"}
        return 200, ({"items": [_trainjob(ns)]} if last == "trainjobs" else _trainjob(ns))
    if last == "pods":
        return 200, {"items": [_pod(ns)]}
    if last == "events":
        return 200, {"items": [_event(ns)]}
    return 404, {"kind": "Status", "code": 404}


def _train_fn() -> None:
    print("training")


def record_sdk_calls(namespace: str) -> tuple[list[tuple[str, str]], set[str]]:
    """Call every public TrainerClient method in `namespace`; return the HTTP calls and the methods run."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient

    calls: list[tuple[str, str]] = []
    lock = threading.Lock()

    def request(_self: Any, method: str, url: str, query_params: Any = None, **_: Any) -> Any:
        query = f"?{urlencode(query_params)}" if query_params else ""
        with lock:
            calls.append((method, urlparse(url).path + query))
        status, body = _answer(method, urlparse(url).path)
        if status >= 400:
            raise rest.ApiException(http_resp=_Response(status, body))
        return _Response(status, body)

    configuration = client.Configuration(host="http://fake-apiserver")
    with mock.patch.object(rest.RESTClientObject, "request", request):
        trainer = TrainerClient(
            backend_config=KubernetesBackendConfig(namespace=namespace, client_configuration=configuration)
        )
        runtime = trainer.get_runtime(RUNTIME)
        plans: dict[str, Any] = {
            "list_runtimes": lambda: trainer.list_runtimes(),
            "get_runtime": lambda: trainer.get_runtime(RUNTIME),
            "get_runtime_packages": lambda: trainer.get_runtime_packages(runtime),
            "train": lambda: trainer.train(runtime=runtime, trainer=CustomTrainer(func=_train_fn)),
            "list_jobs": lambda: trainer.list_jobs(),
            "get_job": lambda: trainer.get_job(JOB),
            "get_job_logs": lambda: (list(trainer.get_job_logs(JOB)), list(trainer.get_job_logs(JOB, follow=True))),
            "get_job_events": lambda: trainer.get_job_events(JOB),
            "wait_for_job_status": lambda: trainer.wait_for_job_status(JOB, timeout=4, polling_interval=1),
            "delete_job": lambda: trainer.delete_job(JOB),
        }
        for run in plans.values():
            run()
    return calls, set(plans)


def public_methods() -> set[str]:
    from kubeflow.trainer import TrainerClient

    return {n for n, _ in inspect.getmembers(TrainerClient, inspect.isfunction) if not n.startswith("_")}
