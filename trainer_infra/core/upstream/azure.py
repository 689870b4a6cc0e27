"""Names Microsoft Azure defines."""

from __future__ import annotations

#: The Azure Files CSI driver (built into AKS).
FILE_CSI_DRIVER = "file.csi.azure.com"
#: The label (and Spot taint key) AKS puts on every node of a Spot pool (https://learn.microsoft.com/azure/aks/spot-node-pool).
SCALESET_PRIORITY_LABEL = "kubernetes.azure.com/scalesetpriority"
