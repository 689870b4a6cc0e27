"""What trainer's cache initializer (`pkg/initializers/dataset/cache.py`, 2.2.1 and 2.3.0) creates for a TrainJob,
field for field, from the env of its pod: the honest variant every deputy rule must admit (unit tests and e2e)."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
#: cache.py's defaults (types.CacheDatasetInitializer) for what the runtime does not set
DEFAULTS = {
    "CLUSTER_SIZE": "3",
    "HEAD_CPU": "1",
    "HEAD_MEM": "1Gi",
    "WORKER_CPU": "2",
    "WORKER_MEM": "2Gi",
    "READINESS_INITIAL_DELAY_SECONDS": "5",
    "READINESS_PERIOD_SECONDS": "10",
    "READINESS_TIMEOUT_SECONDS": "5",
    "READINESS_FAILURE_THRESHOLD": "3",
}


def owner_reference(trainjob: Obj) -> Obj:
    return {
        "apiVersion": trainjob["apiVersion"],
        "kind": trainjob["kind"],
        "name": trainjob["metadata"]["name"],
        "uid": trainjob["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def cache_objects(trainjob: Obj, env: dict[str, str]) -> tuple[Obj, Obj, Obj]:
    """(ServiceAccount, LeaderWorkerSet, Service) as cache.py builds them; `env`: the initializer's env
    (CACHE_IMAGE, IAM_ROLE, METADATA_LOC, sizes, STORAGE_URI=cache://schema/table)."""
    cfg = {**DEFAULTS, **env}
    name, ns = trainjob["metadata"]["name"], trainjob["metadata"]["namespace"]
    owner = [owner_reference(trainjob)]
    schema, table = cfg["STORAGE_URI"][len("cache://") :].split("/")[:2]
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": f"{name}-cache",
            "namespace": ns,
            "annotations": {
                "eks.amazonaws.com/sts-regional-endpoints": "true",
                "eks.amazonaws.com/role-arn": cfg["IAM_ROLE"],
            },
            "ownerReferences": owner,
        },
    }
    pod_env = [
        {"name": k, "value": v}
        for k, v in (("METADATA_LOC", cfg.get("METADATA_LOC", "")), ("TABLE_NAME", table), ("SCHEMA_NAME", schema))
        if v
    ]

    def container(role: str, cpu: str, mem: str) -> Obj:
        res = {"cpu": cpu, "memory": mem}
        return {
            "name": role,
            "image": cfg["CACHE_IMAGE"],
            "command": [role],
            "args": ["0.0.0.0", "50051"],
            "resources": {"limits": dict(res), "requests": dict(res)},
            "env": pod_env,
            "ports": [{"containerPort": 50051, "name": "grpc"}, {"containerPort": 8080, "name": "health"}],
            "readinessProbe": {
                "httpGet": {"path": "/ready", "port": 8080},
                "initialDelaySeconds": int(cfg["READINESS_INITIAL_DELAY_SECONDS"]),
                "periodSeconds": int(cfg["READINESS_PERIOD_SECONDS"]),
                "timeoutSeconds": int(cfg["READINESS_TIMEOUT_SECONDS"]),
                "failureThreshold": int(cfg["READINESS_FAILURE_THRESHOLD"]),
            },
        }

    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": f"{name}-cache", "namespace": ns, "ownerReferences": owner},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": int(cfg["CLUSTER_SIZE"]),
                "leaderTemplate": {
                    "metadata": {"labels": {"app": f"{name}-cache-head"}},
                    "spec": {
                        "serviceAccountName": f"{name}-cache",
                        "containers": [container("head", cfg["HEAD_CPU"], cfg["HEAD_MEM"])],
                    },
                },
                "workerTemplate": {
                    "spec": {
                        "serviceAccountName": f"{name}-cache",
                        "containers": [container("worker", cfg["WORKER_CPU"], cfg["WORKER_MEM"])],
                    }
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-cache-service", "namespace": ns, "ownerReferences": owner},
        "spec": {
            "selector": {"app": f"{name}-cache-head"},
            "ports": [{"protocol": "TCP", "port": 50051, "targetPort": 50051}],
        },
    }
    return sa, lws, service
