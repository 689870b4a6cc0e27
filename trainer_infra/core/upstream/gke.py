"""Names Google Kubernetes Engine defines (its CSI drivers)."""

from __future__ import annotations

#: The Filestore and Managed Lustre CSI drivers (GKE add-ons).
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"
LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"
