"""What the data cache's upstream program creates and what the platform pins in it: the names trainer's
`pkg/initializers/dataset/cache.py` (2.2.1, 2.3.0) gives its objects and pods, and the settings the cache
runtime pins (`PINNED_ENV`, each name once: the catalog writes them, the admission rules and their messages
read them from here).

The cache runtime's dataset-initializer runs as ServiceAccount `kubeflow-trainer-cache-initializer` in the
TrainJob's namespace; it reads its TrainJob, then creates a ServiceAccount, a LeaderWorkerSet (the cache
cluster) and a Service.
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.upstream import aws
from trainer_infra.datacache.config import DataCacheConfig

CACHE_INITIALIZER = "kubeflow-trainer-cache-initializer"  # the ServiceAccount the cache runtime names
#: What cache.py names the objects it creates for TrainJob `<name>`: `<name>-cache` (ServiceAccount and
#: LeaderWorkerSet, whose pods run as that ServiceAccount) and `<name>-cache-service`.
CACHE_SUFFIX = "-cache"
SERVICE_SUFFIX = "-cache-service"
#: The env cache.py puts into the cache pods (and nothing else).
CACHE_POD_ENV = ("METADATA_LOC", "TABLE_NAME", "SCHEMA_NAME")
#: The IRSA annotations cache.py sets on the per-job ServiceAccount.
ROLE_ANNOTATION = aws.IRSA_ROLE_ANNOTATION
STS_ANNOTATION = aws.IRSA_STS_ANNOTATION


#: The cache initializer's settings the platform pins in the cache runtime (a member's `initializer.dataset.env`
#: may only repeat them): which image the cache pods run, how many, how large, with which cloud role.
PINNED_ENV = ("CACHE_IMAGE", "CLUSTER_SIZE", "HEAD_CPU", "HEAD_MEM", "WORKER_CPU", "WORKER_MEM", "IAM_ROLE")
#: The pinned variable that marks a container as the cache initializer (it names the cache image).
IMAGE_ENV = PINNED_ENV[0]


def pinned_env(cfg: DataCacheConfig, image: str) -> dict[str, str]:
    """`PINNED_ENV` with the platform's values, in that order."""
    c = cfg.cluster
    values = (image, str(c.size), c.head_cpu, c.head_memory, c.worker_cpu, c.worker_memory, c.iam_role)
    return dict(zip(PINNED_ENV, values, strict=True))


def cache_image(cfg: DataCacheConfig, trainer_version: str) -> str:
    """The cache image, pinned: the configured tag, or the Trainer version's (what the chart would use)."""
    image = cfg.cache_image
    return f"{image.registry}/{image.repository}:{image.tag or f'v{trainer_version}'}"


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
