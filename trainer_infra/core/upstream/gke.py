"""Names Google Kubernetes Engine defines (its CSI drivers)."""

from __future__ import annotations

#: The Filestore and Managed Lustre CSI drivers (GKE add-ons).
FILESTORE_CSI_DRIVER = "filestore.csi.storage.gke.io"
LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"
#: The physical-topology node labels GKE sets (https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas).
TOPOLOGY_BLOCK_LABEL = "cloud.google.com/gce-topology-block"
TOPOLOGY_SUBBLOCK_LABEL = "cloud.google.com/gce-topology-subblock"
TOPOLOGY_HOST_LABEL = "cloud.google.com/gce-topology-host"
#: The ProvisioningRequest class of GKE's queued provisioning (Dynamic Workload Scheduler flex-start),
#: https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
