"""Trainer's data cache: chart values (LeaderWorkerSet, cache image) and the per-namespace RBAC that
the chart leaves out. The chart creates ClusterRole `kubeflow-trainer-cache-initializer`; the cache
runtime's dataset-initializer runs as ServiceAccount `kubeflow-trainer-cache-initializer` in the
TrainJob's namespace, so every team namespace needs that ServiceAccount and a RoleBinding to the role
(upstream documents applying `manifests/overlays/data-cache/namespace-rbac` per namespace)."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.images import mirror_image, split_image
from trainer_infra.core.objects import ManagedObject
from trainer_infra.manifests import meta
from trainer_infra.storage.config import DataCacheConfig

CACHE_INITIALIZER = "kubeflow-trainer-cache-initializer"


def data_cache_values(cfg: DataCacheConfig, mirror: str | None, trainer: str) -> dict[str, Any]:
    """Trainer chart values. The chart's cache runtime stays off: the catalog owns runtimes. The tag is
    written out (`v<trainer>` by default, as the chart's own default): an empty tag is not a pin."""
    if not cfg.enabled:
        return {}
    image = cfg.cache_image
    registry, repository = image.registry, image.repository
    if mirror:
        probe, _ = split_image(mirror_image(f"{registry}/{repository}:x", mirror))
        registry, _, repository = probe.partition("/")
    return {
        "dataCache": {
            "enabled": True,
            "lws": {"install": cfg.install_lws},
            "cacheImage": {"registry": registry, "repository": repository, "tag": image.tag or f"v{trainer}"},
            "runtimes": {"torchDistributedWithCache": {"enabled": False}},
        }
    }


def cache_initializer_rbac(namespace: str) -> list[ManagedObject]:
    rbac = "rbac.authorization.k8s.io"
    return [
        ManagedObject(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta.metadata(CACHE_INITIALIZER, namespace)}
        ),
        ManagedObject(
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "RoleBinding",
                "metadata": meta.metadata(CACHE_INITIALIZER, namespace),
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": CACHE_INITIALIZER},
                "subjects": [{"kind": "ServiceAccount", "name": CACHE_INITIALIZER, "namespace": namespace}],
            }
        ),
    ]
