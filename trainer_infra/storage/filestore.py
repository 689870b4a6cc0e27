"""Google Filestore: one Filestore instance per team claim."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.storage.backend import GI, StorageDefaults


class FilestoreBackend(StrictModel):
    """Google Filestore through the GKE Filestore CSI driver (`filestore.csi.storage.gke.io`)."""

    tier: Literal["standard", "premium", "enterprise", "zonal"] = "standard"
    network: str = Field(default="default", description="VPC network of the GKE cluster.")
    connect_mode: Literal["DIRECT_PEERING", "PRIVATE_SERVICE_ACCESS"] | None = None


class FilestoreStorage(StorageDefaults):
    name = "filestore"
    settings_model = FilestoreBackend

    def provisioner(self, settings: Any) -> str | None:
        return "filestore.csi.storage.gke.io"

    def parameters(self, settings: Any) -> dict[str, str]:
        s: FilestoreBackend = settings
        out = {"tier": s.tier, "network": s.network}
        if s.connect_mode:
            out["connect-mode"] = s.connect_mode
        return dict(sorted(out.items()))

    def minimum_bytes(self, settings: Any) -> tuple[int, str] | None:
        s: FilestoreBackend = settings
        size = {"standard": 1024, "premium": 2560, "enterprise": 1024, "zonal": 1024}[s.tier]
        return size * GI, f"Filestore {s.tier} instances start at {size}Gi"


BACKEND = FilestoreStorage()
