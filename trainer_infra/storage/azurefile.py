"""Azure Files: one file share per team claim (NFS on Premium SKUs, or SMB)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.upstream import azure
from trainer_infra.storage.backend import GI, StorageDefaults


class AzureFileBackend(StrictModel):
    """Azure Files through the Azure Files CSI driver (`file.csi.azure.com`, built into AKS)."""

    sku_name: Literal["Standard_LRS", "Standard_ZRS", "Standard_GRS", "Premium_LRS", "Premium_ZRS"] = "Premium_LRS"
    protocol: Literal["nfs", "smb"] = Field(
        default="nfs", description="NFS needs a Premium SKU; SMB works with every SKU."
    )


class AzureFileStorage(StorageDefaults):
    name = "azurefile"
    settings_model = AzureFileBackend
    driver = azure.FILE_CSI_DRIVER

    def parameters(self, s: AzureFileBackend) -> dict[str, str | None]:
        return {"skuName": s.sku_name, "protocol": s.protocol}

    def mount_options(self, s: AzureFileBackend) -> list[str]:
        if s.protocol == "smb":
            # Training images run as many uids: open permissions, symlinks, no byte-range locks (as AKS docs).
            return ["dir_mode=0777", "file_mode=0777", "mfsymlinks", "cache=strict", "actimeo=30", "nobrl"]
        return []

    def minimum_bytes(self, s: AzureFileBackend) -> tuple[int, str] | None:
        return (100 * GI, "Azure Files Premium shares start at 100Gi") if s.sku_name.startswith("Premium") else None

    def checks(self, s: AzureFileBackend) -> list[ConfigIssue]:
        if s.protocol == "nfs" and "Premium" not in s.sku_name:
            message = f"NFS shares need a Premium SKU, not {s.sku_name}"
            hint = "use skuName Premium_LRS or Premium_ZRS, or protocol smb"
            return [ConfigIssue("storage.azurefile.protocol", message, "nfs", hint)]
        return []


BACKEND = AzureFileStorage()
