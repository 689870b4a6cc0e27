"""Names Microsoft Azure defines."""

from __future__ import annotations

#: The Azure Files CSI driver (built into AKS).
FILE_CSI_DRIVER = "file.csi.azure.com"
