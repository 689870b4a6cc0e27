"""Drive the real `kubeflow` SDK (TrainerClient, Kubernetes backend) against an in-memory API server.

The SDK's own code lists runtimes, converts each ClusterTrainingRuntime/TrainingRuntime into its `Runtime`
type and builds the TrainJob body; only the Kubernetes client classes the backend instantiates are
replaced by a fake that serves our rendered runtimes and records what the SDK would create.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from kubernetes import client as k8s_client

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"


class _Done:
    """What `async_req=True` returns: `.get(timeout)` yields the result or raises."""

    def __init__(self, value: Any = None, error: Exception | None = None) -> None:
        self.value, self.error = value, error

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return copy.deepcopy(self.value)


def _not_found() -> k8s_client.ApiException:
    return k8s_client.ApiException(status=404, reason="Not Found")


class FakeCluster:
    """Holds runtimes by scope and records every created object (namespace, plural, body)."""

    def __init__(self, objects: list[dict[str, Any]], trainer_version: str = "2.2.1") -> None:
        self.cluster = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterTrainingRuntime"}
        self.namespaced = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "TrainingRuntime"
        }
        self.trainer_version = trainer_version
        self.created: list[tuple[str, str, dict[str, Any]]] = []

    # --- CustomObjectsApi -------------------------------------------------------------------
    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kw: Any) -> Any:
        assert (group, version, plural) == (GROUP, VERSION, "clustertrainingruntimes")
        return self._reply({"items": list(self.cluster.values())}, kw)

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, **kw: Any) -> Any:
        assert (group, version, plural) == (GROUP, VERSION, "trainingruntimes")
        items = [o for (ns, _), o in self.namespaced.items() if ns == namespace]
        return self._reply({"items": items}, kw)

    def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str, **kw: Any
    ) -> Any:
        obj = self.namespaced.get((namespace, name))
        return self._reply(obj, kw, None if obj else _not_found())

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str, **kw: Any) -> Any:
        obj = self.cluster.get(name)
        return self._reply(obj, kw, None if obj else _not_found())

    def create_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, body: dict[str, Any], **kw: Any
    ) -> Any:
        self.created.append((namespace, plural, copy.deepcopy(body)))
        return self._reply(body, kw)

    # --- CoreV1Api --------------------------------------------------------------------------
    def read_namespaced_config_map(self, name: str, namespace: str, **kw: Any) -> Any:
        if (name, namespace) != ("kubeflow-trainer-public", "kubeflow-system"):
            raise _not_found()
        return types.SimpleNamespace(data={"kubeflow_trainer_version": self.trainer_version})

    @staticmethod
    def _reply(value: Any, kw: dict[str, Any], error: Exception | None = None) -> Any:
        if kw.get("async_req"):
            return _Done(value, error)
        if error is not None:
            raise error
        return copy.deepcopy(value)


@contextmanager
def sdk_against(cluster: FakeCluster, namespace: str = "default") -> Iterator[Any]:
    """A real `kubeflow.trainer.TrainerClient` whose Kubernetes API calls go to `cluster`."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient
    from kubeflow.trainer.backends.kubernetes import backend as sdk_backend

    fake_client = types.SimpleNamespace(
        ApiClient=lambda *a, **k: object(),
        CustomObjectsApi=lambda *a, **k: cluster,
        CoreV1Api=lambda *a, **k: cluster,
        ApiException=k8s_client.ApiException,
    )
    with mock.patch.object(sdk_backend, "client", fake_client):
        config = KubernetesBackendConfig(namespace=namespace, client_configuration=k8s_client.Configuration())
        yield TrainerClient(backend_config=config)
