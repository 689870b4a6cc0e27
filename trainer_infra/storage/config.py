"""`storage` and `dataCache` in stack config: where team data lives, and the optional data cache."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainer_infra.config.base import StrictModel
from trainer_infra.config.types import DnsLabel, DnsSubdomain
from trainer_infra.storage.backends import (
    AbsolutePath,
    AzureFileBackend,
    Backend,
    EfsBackend,
    ExistingBackend,
    FilestoreBackend,
    LustreBackend,
    NfsBackend,
)

BACKEND_KEYS = ("nfs", "efs", "filestore", "azurefile", "lustre", "existing")


class StorageConfig(StrictModel):
    """Shared ReadWriteMany storage: one backend (exactly one of the backend keys), one StorageClass,
    and in every team namespace one claim named `claimName`, mounted at `mountPath` by every runtime."""

    nfs: NfsBackend | None = None
    efs: EfsBackend | None = None
    filestore: FilestoreBackend | None = None
    azurefile: AzureFileBackend | None = None
    lustre: LustreBackend | None = None
    existing: ExistingBackend | None = None
    class_name: DnsSubdomain = Field(
        default="trainer-platform-shared", description="StorageClass we create (ignored with `existing`)."
    )
    reclaim_policy: Literal["Retain", "Delete"] = Field(
        default="Retain", description="Retain keeps a volume's data when its claim is deleted."
    )
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allow_volume_expansion: bool = Field(default=True, description="Let `teams[].storage.size` grow in place.")
    mount_options: list[str] | None = Field(default=None, description="Mount options (default: the backend's).")
    claim_name: DnsLabel = Field(
        default="workspace", description="Name of the team claim in every team namespace (runtimes mount it by name)."
    )
    mount_path: AbsolutePath = Field(
        default="/workspace", description="Where initializers and trainers see the team claim."
    )

    @model_validator(mode="after")
    def _exactly_one_backend(self) -> StorageConfig:
        chosen = [k for k in BACKEND_KEYS if getattr(self, k) is not None]
        if len(chosen) != 1:
            found = ", ".join(chosen) or "none"
            raise ValueError(f"exactly one backend key ({', '.join(BACKEND_KEYS)}); found {found}")
        return self

    @property
    def backend(self) -> Backend:
        chosen: Backend = next(getattr(self, k) for k in BACKEND_KEYS if getattr(self, k) is not None)
        return chosen

    @property
    def storage_class_name(self) -> str:
        return self.existing.class_name if self.existing else self.class_name


class CacheImageConfig(StrictModel):
    registry: str = "ghcr.io"
    repository: str = "kubeflow/trainer/data-cache"
    tag: str = Field(default="", description="Default: the Trainer chart version.")


class DataCacheConfig(StrictModel):
    """Trainer's data cache (LeaderWorkerSet-backed dataset cache): the chart installs LWS and the
    cache initializer's ClusterRole; we add its ServiceAccount and RoleBinding in every team namespace."""

    enabled: bool = False
    install_lws: bool = Field(default=True, description="Install LeaderWorkerSet with the Trainer chart.")
    cache_image: CacheImageConfig = Field(default_factory=CacheImageConfig)
