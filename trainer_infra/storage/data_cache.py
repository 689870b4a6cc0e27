"""Trainer's data cache: chart values (LeaderWorkerSet, cache image) and the RBAC of the cache initializer.

The cache runtime's dataset-initializer runs as ServiceAccount `kubeflow-trainer-cache-initializer` in the
TrainJob's namespace; it reads its TrainJob, then creates a ServiceAccount, a LeaderWorkerSet (the cache
cluster) and a Service (trainer `pkg/initializers/dataset/cache.py`). Every team namespace gets that
ServiceAccount and a RoleBinding to our own ClusterRole: upstream's (chart and kustomize, 2.2.1 and 2.3.0)
lacks `get` on trainjobs, so the initializer's first call answers 403, which cache.py logs and swallows —
the job then runs without a cache (trainer#3945).

Chart values, three upstream traps:
- the LWS subchart's `condition: dataCache.enabled,dataCache.lws.install`: Helm reads only the first path
  that resolves, so `lws.install: false` is ignored while `dataCache.enabled` is true. The chart's
  `dataCache.enabled` does nothing else we use (its ClusterRole is replaced by ours, its runtime is off: the
  catalog owns runtimes), so it is set to `installLws` — the only way to really skip LWS;
- the subchart takes its values from the top-level `lws:` key (`dataCache.lws.*` never reaches it): the LWS
  image is pinned and mirrored there, from the compatibility matrix;
- an empty cache image tag means "the chart version" in the chart but an unpinned image to our policy: the
  tag is resolved here, once, for the chart and for the catalog's cache runtime alike.
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.images import mirror_image, split_image
from trainer_infra.core.objects import ManagedObject
from trainer_infra.manifests import meta
from trainer_infra.storage.config import DataCacheConfig

CACHE_INITIALIZER = "kubeflow-trainer-cache-initializer"  # the ServiceAccount the cache runtime names
CACHE_ROLE = "trainer-platform-cache-initializer"
RBAC = "rbac.authorization.k8s.io"

#: What cache.py calls, nothing more (trainer 2.2.1/2.3.0 `pkg/initializers/dataset/cache.py`): get its TrainJob
#: (upstream's role forgot it: trainer#3945), create a ServiceAccount, a LeaderWorkerSet and a Service owned by
#: that TrainJob (`trainjobs/finalizers` for their blockOwnerDeletion), then poll the LeaderWorkerSet with `get`.
#: Upstream also grants list/watch and `delete` on ServiceAccounts: cache.py never lists, and its only delete
#: is a clean-up on failure of the ServiceAccount it created, which the TrainJob's owner reference removes
#: anyway (garbage collection). RBAC cannot say "only what you created": a `delete` would let the
#: initializer's pod delete every ServiceAccount of the namespace, so it has none (the clean-up logs a 403).
CACHE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs/finalizers"], "verbs": ["update"]},
)
#: What cache.py names the objects it creates for TrainJob `<name>`: `<name>-cache` (ServiceAccount and
#: LeaderWorkerSet, whose pods run as that ServiceAccount) and `<name>-cache-service`.
CACHE_SUFFIX = "-cache"
SERVICE_SUFFIX = "-cache-service"
#: The env cache.py puts into the cache pods (and nothing else).
CACHE_POD_ENV = ("METADATA_LOC", "TABLE_NAME", "SCHEMA_NAME")
#: The IRSA annotations cache.py sets on the per-job ServiceAccount.
ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
STS_ANNOTATION = "eks.amazonaws.com/sts-regional-endpoints"


def pinned_env(cfg: DataCacheConfig, image: str) -> dict[str, str]:
    """The cache initializer's settings the platform pins in the cache runtime (a member's `initializer.dataset.env`
    may only repeat them): which image the cache pods run, how many, how large, with which cloud role."""
    c = cfg.cluster
    return {
        "CACHE_IMAGE": image,
        "CLUSTER_SIZE": str(c.size),
        "HEAD_CPU": c.head_cpu,
        "HEAD_MEM": c.head_memory,
        "WORKER_CPU": c.worker_cpu,
        "WORKER_MEM": c.worker_memory,
        "IAM_ROLE": c.iam_role,
    }


def cache_image(cfg: DataCacheConfig, trainer_version: str) -> str:
    """The cache image, pinned: the configured tag, or the Trainer version's (what the chart would use)."""
    image = cfg.cache_image
    return f"{image.registry}/{image.repository}:{image.tag or f'v{trainer_version}'}"


def data_cache_values(cfg: DataCacheConfig, trainer_version: str, lws_image: str, mirror: str | None) -> dict[str, Any]:
    """Trainer chart values; `lws_image` is the matrix's LWS image, already through the mirror."""
    if not cfg.enabled:
        return {}
    repo, tag = split_image(mirror_image(cache_image(cfg, trainer_version), mirror))
    registry, _, repository = repo.partition("/")
    values: dict[str, Any] = {
        "dataCache": {
            "enabled": cfg.install_lws,
            "lws": {"install": cfg.install_lws},
            "cacheImage": {"registry": registry, "repository": repository, "tag": tag},
            "runtimes": {"torchDistributedWithCache": {"enabled": False}},
        }
    }
    if cfg.install_lws:
        lws_repo, lws_tag = split_image(lws_image)
        values["lws"] = {"image": {"manager": {"repository": lws_repo, "tag": lws_tag}}}
    return values


def cache_initializer_role() -> ManagedObject:
    return ManagedObject(
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": meta.metadata(CACHE_ROLE),
            "rules": [dict(r) for r in CACHE_RULES],
        }
    )


def cache_initializer_rbac(namespace: str) -> list[ManagedObject]:
    return [
        ManagedObject(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta.metadata(CACHE_INITIALIZER, namespace)}
        ),
        ManagedObject(
            {
                "apiVersion": f"{RBAC}/v1",
                "kind": "RoleBinding",
                "metadata": meta.metadata(CACHE_INITIALIZER, namespace),
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": CACHE_ROLE},
                "subjects": [{"kind": "ServiceAccount", "name": CACHE_INITIALIZER, "namespace": namespace}],
            }
        ),
    ]


def _cache_container(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "ports": [{"containerPort": 50051, "name": "grpc"}, {"containerPort": 8080, "name": "health"}],
    }


#: The pods of the cache cluster, as the dataset initializer creates them at run time (trainer 2.2.1 and 2.3.0
#: `pkg/initializers/dataset/cache.py`: a LeaderWorkerSet whose head and worker templates set no
#: securityContext and cannot be configured). Only what Pod Security judges; the `restricted` guard rail
#: checks them like the runtime's own pods, so the cache runtime is refused for restricted teams.
CACHE_CLUSTER_PODS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "data cache pods (a LeaderWorkerSet the cache initializer creates, no securityContext settable)",
        {"containers": [_cache_container("head")]},
    ),
    ("data cache worker pods", {"containers": [_cache_container("worker")]}),
)
