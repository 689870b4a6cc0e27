"""Trainer's chart values for the data cache (LeaderWorkerSet, cache image).

Three upstream traps:
- the LWS subchart's `condition: dataCache.enabled,dataCache.lws.install`: Helm reads only the first path
  that resolves, so `lws.install: false` is ignored while `dataCache.enabled` is true. The chart's
  `dataCache.enabled` does nothing else we use (its ClusterRole is replaced by ours, its runtime is off: the
  catalog owns runtimes), so it is set to `installLws` — the only way to really skip LWS;
- the subchart takes its values from the top-level `lws:` key (`dataCache.lws.*` never reaches it): the LWS
  image is pinned and mirrored there, from the compatibility matrix;
- an empty cache image tag means "the chart version" in the chart but an unpinned image to our policy: the
  tag is resolved once (`pinned.cache_image`), for the chart and for the catalog's cache runtime alike.
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.images import mirror_image, split_image
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.datacache.pinned import cache_image


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
