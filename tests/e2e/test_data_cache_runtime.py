"""The data cache runtime through the real controllers (LeaderWorkerSet included), on the `local` stack's render:
the dataset initializer's pod, the cache's leader and worker pods, the trainer. Runs after test_scenarios.py in the
install session and cleans up its TrainJobs like it (quota is shared)."""

from __future__ import annotations

import pytest

from tests.cache_initializer import cache_objects
from tests.e2e.platform import (
    TJ,
    WL,
    Obj,
    Platform,
    describe_namespace,
    jobset_pods,
    trainjob,
    unique,
    wait_admitted,
)
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import wait_for

pytestmark = pytest.mark.e2e

# -- the data cache runtime through the real controllers (LeaderWorkerSet included) -------------

CACHE_RUNTIME = "torch-distributed-with-cache"
CACHE_SA = "kubeflow-trainer-cache-initializer"
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def test_data_cache_runtime_runs_through_the_controllers(
    sandbox: Sandbox, platform: Platform, clean_teams: None
) -> None:
    """A TrainJob on the cache runtime (the SDK's DataCacheInitializer env): the dataset initializer runs as the
    cache ServiceAccount with the pinned cache image and sizes; acting as that ServiceAccount, what cache.py
    creates (tests/cache_initializer.py, field for field) is admitted, the real LWS controller creates its pods
    with the pinned image (Kueue leaves the label-less cache cluster uncharged: its owner rule); then the
    trainer runs."""
    served = {r["metadata"]["name"] for r in platform.render.of_kind("ClusterTrainingRuntime")}
    assert CACHE_RUNTIME in served, f"stack local does not serve {CACHE_RUNTIME} (dataCache.enabled)"
    team = platform.teams()[0]
    ns, admin = team.namespace, sandbox.client
    name = unique("cached")
    job = trainjob(name, ns, gpus=1, nodes=1, runtime=CACHE_RUNTIME, queue=team.queue, cpu="1")
    pinned = _cache_runtime_env(platform)
    job["spec"]["initializer"] = {
        "dataset": {
            "storageUri": "cache://sales/orders",
            # what the SDK's DataCacheInitializer sends, with num_data_nodes = dataCache.cluster.size - 1
            "env": [
                {"name": "CLUSTER_SIZE", "value": pinned["CLUSTER_SIZE"]},
                {"name": "METADATA_LOC", "value": "s3://bucket/orders/metadata.json"},
            ],
        }
    }
    sandbox.user_client(team.user, team.groups).create(job)
    wait_admitted(admin, ns, name, 90)

    def initializer_pod() -> Obj | None:
        pods = [
            p
            for p in jobset_pods(admin, ns, name)
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == "dataset-initializer"
        ]
        return pods[0] if pods else None

    pod = wait_for(f"{ns}/{name}: the dataset-initializer pod", initializer_pod, 90)
    assert pod["spec"]["serviceAccountName"] == CACHE_SA
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
    image = env["CACHE_IMAGE"]
    assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":"), f"cache image not pinned: {image}"
    assert {k: env[k] for k in pinned} == pinned, env

    as_initializer = admin.impersonating(
        f"system:serviceaccount:{ns}:{CACHE_SA}", ("system:serviceaccounts", f"system:serviceaccounts:{ns}")
    )
    owner = as_initializer.get(*TJ, name, ns)  # 403 with upstream's ClusterRole (trainer#3945)
    account, cluster, service = cache_objects(owner, env)
    as_initializer.create(account)
    created = as_initializer.create(cluster)
    as_initializer.create(service)
    # Kueue defaults no queue under a TrainJob it manages (jobframework/defaults.go): the cache cluster is
    # bounded (one per TrainJob, pinned size and resources), not charged; docs/teams.md says so
    assert "kueue.x-k8s.io/queue-name" not in created["metadata"].get("labels", {}), created["metadata"]

    def cache_pods_placed() -> list[Obj] | bool:
        """Every pod of the cache cluster created by the real LWS and StatefulSet controllers (our Pod policy
        admitted them) and either running or waiting for a node without taints: the sandbox's kwok nodes are all
        tainted, and cache.py's pods carry no toleration (a real cluster runs them on its untainted CPU nodes)."""
        pods = admin.list("v1", "Pod", ns, label_selector=f"leaderworkerset.sigs.k8s.io/name={name}-cache")
        placed = [
            p
            for p in pods
            if p["status"].get("phase") == "Running"
            or any("untolerated taint" in c.get("message", "") for c in p["status"].get("conditions", []))
        ]
        return placed if len(placed) == int(pinned["CLUSTER_SIZE"]) else False

    try:
        pods = wait_for(f"{ns}/{name}-cache: leader and worker pods created and placed", cache_pods_placed, 120)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
    for p in pods:
        assert p["spec"]["serviceAccountName"] == f"{name}-cache"
        assert {c["image"] for c in p["spec"]["containers"]} == {pinned["CACHE_IMAGE"]}
    workloads = admin.list(*WL, ns)
    charged = [
        w
        for w in workloads
        if any(o["kind"] == "LeaderWorkerSet" for o in w["metadata"].get("ownerReferences", []))
        or w["metadata"].get("labels", {}).get("leaderworkerset.sigs.k8s.io/name") == f"{name}-cache"
    ]
    assert charged == [], "Kueue now charges the cache cluster: update deputies.CACHE_CLUSTER_CHARGE and the docs"

    def trainer_running() -> bool:
        return any(
            p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == "node"
            and p["status"].get("phase") == "Running"
            for p in jobset_pods(admin, ns, name)
        )

    wait_for(f"{ns}/{name}: the trainer pod Running after the initializer completed", trainer_running, 90)


def _cache_runtime_env(platform: Platform) -> dict[str, str]:
    """The cache settings the platform pins in the served cache runtime (dataCache.cluster, the cache image)."""
    rt = next(r for r in platform.runtimes() if r["metadata"]["name"] == CACHE_RUNTIME)
    job = next(j for j in rt["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "dataset-initializer")
    (c,) = job["template"]["spec"]["template"]["spec"]["containers"]
    names = ("CACHE_IMAGE", "CLUSTER_SIZE", "HEAD_CPU", "HEAD_MEM", "WORKER_CPU", "WORKER_MEM", "IAM_ROLE")
    return {e["name"]: e["value"] for e in c["env"] if e["name"] in names}
