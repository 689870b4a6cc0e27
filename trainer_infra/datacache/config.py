"""`dataCache` in stack config: Trainer's optional data cache and the cache cluster the platform pins."""

from __future__ import annotations

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import PositiveQuantity


class CacheImageConfig(StrictModel):
    registry: str = "ghcr.io"
    repository: str = "kubeflow/trainer/data-cache"
    tag: str = Field(default="", description="Default: the Trainer chart version.")


class CacheClusterConfig(StrictModel):
    """The cache cluster every cache job gets, pinned by the platform: the cache initializer runs as a
    ServiceAccount with more rights than a member, so members do not size it (their `CLUSTER_SIZE`, `HEAD_*`,
    `WORKER_*` may only repeat these values) and the cluster's LeaderWorkerSet is refused if it asks for more.
    Kueue does not charge its pods (cache.py sets no queue label, and Kueue defaults none under the TrainJob
    it manages): it is bounded to one per admitted TrainJob of this size; `teams[].resourceQuota` counts it."""

    size: int = Field(default=3, ge=1, le=64, description="Pods of the cache cluster (head + workers).")
    head_cpu: PositiveQuantity = Field(default="1", description="CPU of the head pod (requests = limits).")
    head_memory: PositiveQuantity = Field(default="1Gi", description="Memory of the head pod (requests = limits).")
    worker_cpu: PositiveQuantity = Field(default="2", description="CPU of each worker pod (requests = limits).")
    worker_memory: PositiveQuantity = Field(default="2Gi", description="Memory of each worker pod.")
    iam_role: str = Field(
        default="",
        max_length=2048,
        description="IAM role of the cache pods' per-job ServiceAccount (EKS IRSA annotation); empty: none.",
    )


class DataCacheConfig(StrictModel):
    """Trainer's data cache (LeaderWorkerSet-backed dataset cache): the chart installs LWS and the
    cache initializer's ClusterRole; we add its ServiceAccount and RoleBinding in every team namespace."""

    enabled: bool = False
    install_lws: bool = Field(default=True, description="Install LeaderWorkerSet with the Trainer chart.")
    cache_image: CacheImageConfig = Field(default_factory=CacheImageConfig)
    cluster: CacheClusterConfig = Field(default_factory=CacheClusterConfig)
