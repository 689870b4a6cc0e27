"""The cache initializer's RBAC: our own ClusterRole, and its ServiceAccount and RoleBinding in every team
namespace. Upstream's role (chart and kustomize, 2.2.1 and 2.3.0) lacks `get` on trainjobs, so the initializer's
first call answers 403, which cache.py logs and swallows — the job then runs without a cache (trainer#3945)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import kubernetes, lws, trainer
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.manifests import meta

CACHE_ROLE = "trainer-platform-cache-initializer"
RBAC = kubernetes.RBAC_GROUP

#: What cache.py calls, nothing more (trainer 2.2.1/2.3.0 `pkg/initializers/dataset/cache.py`): get its TrainJob
#: (upstream's role forgot it: trainer#3945), create a ServiceAccount, a LeaderWorkerSet and a Service owned by
#: that TrainJob (`trainjobs/finalizers` for their blockOwnerDeletion), then poll the LeaderWorkerSet with `get`.
#: Upstream also grants list/watch and `delete` on ServiceAccounts: cache.py never lists, and its only delete
#: is a clean-up on failure of the ServiceAccount it created, which the TrainJob's owner reference removes
#: anyway (garbage collection). RBAC cannot say "only what you created": a `delete` would let the
#: initializer's pod delete every ServiceAccount of the namespace, so it has none (the clean-up logs a 403).
CACHE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [lws.GROUP], "resources": ["leaderworkersets"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]},
    {"apiGroups": [trainer.GROUP], "resources": ["trainjobs"], "verbs": ["get"]},
    {"apiGroups": [trainer.GROUP], "resources": ["trainjobs/finalizers"], "verbs": ["update"]},
)


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


def data_cache_objects(cfg: DataCacheConfig, namespaces: Iterable[str]) -> list[ManagedObject]:
    """The role once and the initializer's account in every team namespace (none without the data cache)."""
    if not cfg.enabled:
        return []
    objects = [cache_initializer_role()]
    for namespace in namespaces:
        objects += cache_initializer_rbac(namespace)
    return objects
