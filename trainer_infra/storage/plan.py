"""`storage` → the StorageClass (plus what the backend runs, e.g. a sandbox NFS server), one claim per team and,
with `storage.files` on, the team's read-only file service over it (`files.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer_infra.core.objects import ManagedObject, PlanPart
from trainer_infra.core.upstream import kubernetes
from trainer_infra.manifests import meta
from trainer_infra.storage.config import StorageConfig
from trainer_infra.storage.files import DEFAULT_ID, files_objects
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL, decommission_annotations, team_data_protected


def storage_class(storage: StorageConfig, allow_data_loss: bool) -> ManagedObject | None:
    """Ours unless the backend names an existing class. A Retain class is protected: its parameters and
    provisioner are immutable, so any change replaces it, and it is where every team's data lives."""
    backend, settings = storage.backend, storage.settings
    provisioner = backend.provisioner(settings)
    if provisioner is None:
        return None
    mount_options = storage.mount_options if storage.mount_options is not None else backend.mount_options(settings)
    manifest: dict[str, Any] = {
        "apiVersion": kubernetes.STORAGE_API,
        "kind": "StorageClass",
        "metadata": meta.metadata(storage.class_name),
        "provisioner": provisioner,
        "parameters": {k: v for k, v in sorted(backend.parameters(settings).items()) if v is not None},
        "reclaimPolicy": storage.reclaim_policy,
        "volumeBindingMode": storage.volume_binding_mode,
        "allowVolumeExpansion": storage.allow_volume_expansion,
    }
    if mount_options:
        manifest["mountOptions"] = list(mount_options)
    protected = storage.reclaim_policy == "Retain" and not allow_data_loss
    return ManagedObject(manifest, protect=protected, retain_on_delete=protected)


def team_claim(
    storage: StorageConfig, team: TeamConfig, after: tuple[str, ...], allow_data_loss: bool
) -> ManagedObject:
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
    keep = team_data_protected(team, allow_data_loss)
    return ManagedObject(manifest, after=after, protect=keep, retain_on_delete=keep)


def storage_plan(
    storage: StorageConfig | None,
    teams: Sequence[TeamConfig],
    mirror: str | None,
    allow_data_loss: bool,
    file_ids: tuple[int, int] = (DEFAULT_ID, DEFAULT_ID),
) -> PlanPart:
    """`file_ids`: the uid and gid the file service reads the claims as (the runtimes' own)."""
    if storage is None:
        return PlanPart()
    runs = storage.backend.objects(storage.settings, mirror)
    objects: list[ManagedObject] = list(runs)
    after = storage.backend.after(storage.settings, runs)
    sc = storage_class(storage, allow_data_loss)
    if sc is not None:
        objects.append(sc)
        after += (sc.key,)
    for team in teams:
        claim = team_claim(storage, team, after, allow_data_loss)
        objects.append(claim)
        if storage.files.enabled:
            objects += files_objects(storage.files, team, storage.claim_name, mirror, file_ids, after=(claim.key,))
    return PlanPart(objects=tuple(objects))
