"""Opt-in (`pytest -m cluster`, needs KUBECONFIG and Kueue installed): the API server itself accepts the
local stack's node-pool and queue objects (server-side apply, dry run: nothing is changed).

What it proves beyond the offline harness: Node objects with status are accepted on create, Kueue's
webhooks accept the flavors/queues, and the kwok RBAC/Deployment pass admission."""

from __future__ import annotations

import os

import pytest

from tests.helpers import stack_raw
from trainer_infra.stack.build import plan_pools_and_queues
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.cluster


@pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="needs KUBECONFIG")
def test_cluster_accepts_local_pool_and_queue_objects() -> None:
    from kubernetes import config, dynamic
    from kubernetes.client import api_client

    config.load_kube_config()
    client = dynamic.DynamicClient(api_client.ApiClient())
    part = plan_pools_and_queues(validate(stack_raw("local")))
    namespaces = {o.manifest["metadata"]["namespace"] for o in part.objects if "namespace" in o.manifest["metadata"]}
    for ns in sorted(namespaces):  # LocalQueues need their (tenancy-owned) namespace to exist
        client.resources.get(api_version="v1", kind="Namespace").server_side_apply(
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            field_manager="trainer-platform-test",
            dry_run="All",
        )
    failures = []
    for obj in part.objects:
        m = obj.manifest
        api = client.resources.get(api_version=m["apiVersion"], kind=m["kind"])
        try:
            api.server_side_apply(
                body=m, namespace=m["metadata"].get("namespace"), field_manager="trainer-platform", dry_run="All"
            )
        except Exception as exc:  # report every refusal at once
            failures.append(f"{m['kind']} {m['metadata']['name']}: {exc}")
    # A dry run cannot create the namespaces first, so only namespace-missing refusals are tolerated.
    assert [f for f in failures if "not found" not in f], failures
