"""The storage backends. A new backend is one module exporting `BACKEND` plus one line here."""

from __future__ import annotations

from trainer_infra.core.registry import Registry
from trainer_infra.storage import azurefile, efs, existing, filestore, lustre, nfs
from trainer_infra.storage.backend import StorageBackend

BACKENDS: Registry[StorageBackend] = Registry(
    nfs.BACKEND,
    efs.BACKEND,
    filestore.BACKEND,
    azurefile.BACKEND,
    lustre.BACKEND,
    existing.BACKEND,
)
