"""`storage` → the StorageClass (plus the NFS driver and, for sandboxes, an NFS server) and one claim
per team; `dataCache` → the cache initializer's RBAC in every team namespace."""

from __future__ import annotations

from typing import Any

from trainer_infra.config.stack import StackConfig
from trainer_infra.manifests import meta
from trainer_infra.plan.model import HelmRelease, ManagedObject, PlanPart
from trainer_infra.storage import backends, nfs
from trainer_infra.storage.config import StorageConfig
from trainer_infra.storage.data_cache import cache_initializer_rbac
from trainer_infra.teams import TeamConfig
from trainer_infra.tenancy.protection import TEAM_LABEL, decommission_annotations, team_data_protected


def storage_class(cfg: StackConfig, storage: StorageConfig, nfs_server: str | None) -> ManagedObject:
    """A Retain class is protected: its parameters and provisioner are immutable, so any change
    replaces it, and it is where every team's data lives."""
    backend = storage.backend
    mount_options = (
        storage.mount_options if storage.mount_options is not None else backends.default_mount_options(backend)
    )
    manifest: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": meta.metadata(storage.class_name),
        "provisioner": backends.provisioner(backend),
        "parameters": backends.parameters(backend, nfs_server),
        "reclaimPolicy": storage.reclaim_policy,
        "volumeBindingMode": storage.volume_binding_mode,
        "allowVolumeExpansion": storage.allow_volume_expansion,
    }
    if mount_options:
        manifest["mountOptions"] = list(mount_options)
    protected = storage.reclaim_policy == "Retain" and not cfg.allow_data_loss
    return ManagedObject(manifest, protect=protected, retain_on_delete=protected)


def team_claim(cfg: StackConfig, storage: StorageConfig, team: TeamConfig, after: tuple[str, ...]) -> ManagedObject:
    manifest = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta.metadata(
            storage.claim_name, team.resolved_namespace, {TEAM_LABEL: team.name}, decommission_annotations(team)
        ),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": storage.storage_class_name,
            "resources": {"requests": {"storage": team.storage.size}},
        },
    }
    keep = team_data_protected(cfg, team)
    return ManagedObject(manifest, after=after, protect=keep, retain_on_delete=keep)


def storage_plan(cfg: StackConfig) -> PlanPart:
    objects: list[ManagedObject] = []
    if cfg.data_cache.enabled:
        for team in cfg.teams:
            objects += cache_initializer_rbac(team.resolved_namespace)
    storage = cfg.storage
    if storage is None:
        return PlanPart(objects=tuple(objects))
    releases: list[HelmRelease] = []
    after: tuple[str, ...] = ()
    backend = storage.backend
    nfs_server: str | None = None
    if isinstance(backend, backends.NfsBackend):
        if backend.driver.install:
            releases.append(nfs.driver_release(backend, cfg.images.registry_mirror, cfg.charts.repository_mirror))
            after += (nfs.RELEASE,)
        if backend.in_cluster_server.enabled:
            server = nfs.in_cluster_server(backend, cfg.images.registry_mirror)
            objects += server
            after += tuple(o.key for o in server if o.manifest["kind"] == "Deployment")
            nfs_server = nfs.server_address(backend)
    if storage.existing is None:
        sc = storage_class(cfg, storage, nfs_server)
        objects.append(sc)
        after += (sc.key,)
    objects += [team_claim(cfg, storage, team, after) for team in cfg.teams]
    return PlanPart(releases=tuple(releases), objects=tuple(objects))
