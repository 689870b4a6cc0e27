"""Names the NFS CSI driver defines (kubernetes-csi/csi-driver-nfs)."""

from __future__ import annotations

#: Its provisioner name.
DRIVER = "nfs.csi.k8s.io"
