"""Google Filestore: one Filestore instance per team claim."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.upstream import gke
from trainer_infra.storage.backend import GI, StorageDefaults


class FilestoreBackend(StrictModel):
    """Google Filestore through the GKE Filestore CSI driver (`filestore.csi.storage.gke.io`)."""

    tier: Literal["standard", "premium", "enterprise", "zonal"] = "standard"
    network: str = Field(default="default", description="VPC network of the GKE cluster.")
    connect_mode: Literal["DIRECT_PEERING", "PRIVATE_SERVICE_ACCESS"] | None = None


class FilestoreStorage(StorageDefaults):
    name = "filestore"
    settings_model = FilestoreBackend
    driver = gke.FILESTORE_CSI_DRIVER

    def parameters(self, s: FilestoreBackend) -> dict[str, str | None]:
        return {"tier": s.tier, "network": s.network, "connect-mode": s.connect_mode}

    def minimum_bytes(self, s: FilestoreBackend) -> tuple[int, str] | None:
        size = {"standard": 1024, "premium": 2560, "enterprise": 1024, "zonal": 1024}[s.tier]
        return size * GI, f"Filestore {s.tier} instances start at {size}Gi"


BACKEND = FilestoreStorage()
