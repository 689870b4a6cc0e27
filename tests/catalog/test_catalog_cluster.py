"""Opt-in (`pytest -m cluster`, KUBECONFIG pointing at a cluster with Kubeflow Trainer installed): the real
API server and Trainer webhooks judge every catalog runtime and the TrainJob the SDK builds for it.

Offline, the CRD schemas, CEL rules and our copy of the webhook rules stand in for them; this test is how a
platform engineer checks that stand-in against the real thing. Runtimes are created under a scratch
name (`tp-conformance-<name>`, strict field validation) and deleted afterwards; TrainJobs are dry-run only.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.catalog.test_catalog_proof import VERSIONS, sdk_trainjob, served

pytestmark = pytest.mark.cluster
GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
PREFIX = "tp-conformance-"


@pytest.fixture(scope="module")
def kube() -> Any:
    from kubernetes import client, config

    config.load_kube_config(context=os.environ.get("KUBE_CONTEXT"))
    return client


@pytest.fixture(scope="module")
def trainer_version(kube: Any) -> str:
    namespace = os.environ.get("KUBEFLOW_SYSTEM_NAMESPACE", "kubeflow-system")
    data = kube.CoreV1Api().read_namespaced_config_map("kubeflow-trainer-public", namespace).data
    version = str(data["kubeflow_trainer_version"]).removeprefix("v")
    if version not in VERSIONS:
        pytest.skip(f"cluster runs Trainer {version}; the catalog proof covers {', '.join(VERSIONS)}")
    return version


@pytest.fixture(scope="module")
def scratch_runtimes(kube: Any, trainer_version: str) -> Iterator[dict[str, str]]:
    """Cluster runtimes created for real under scratch names: key → scratch name."""
    api = kube.CustomObjectsApi()
    created: dict[str, str] = {}
    try:
        for key, runtime in served(trainer_version).items():
            if runtime["kind"] != "ClusterTrainingRuntime":
                continue
            body = copy.deepcopy(runtime)
            body["metadata"]["name"] = PREFIX + body["metadata"]["name"]
            api.create_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", body, field_validation="Strict")
            created[key] = body["metadata"]["name"]
        yield created
    finally:
        for name in created.values():
            api.delete_cluster_custom_object(GROUP, VERSION, "clustertrainingruntimes", name)


def test_the_real_webhooks_accept_every_runtime_and_its_sdk_trainjob(
    kube: Any, trainer_version: str, scratch_runtimes: dict[str, str]
) -> None:
    assert scratch_runtimes, "every cluster runtime was admitted (strict field validation)"
    api = kube.CustomObjectsApi()
    namespace = os.environ.get("TRAINER_PLATFORM_TEST_NAMESPACE", "default")
    refused = {}
    for key, scratch in scratch_runtimes.items():
        trainjob = copy.deepcopy(sdk_trainjob(trainer_version, key))
        trainjob["metadata"]["namespace"] = namespace
        trainjob["spec"]["runtimeRef"]["name"] = scratch
        try:
            api.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "trainjobs", trainjob, dry_run="All", field_validation="Strict"
            )
        except kube.ApiException as exc:
            refused[key] = f"HTTP {exc.status}: {exc.body}"
    assert refused == {}
