"""Shared-filesystem backends: each typed config beside the StorageClass parameters it produces.

Every backend serves ReadWriteMany volumes, so one claim per team can be mounted by every initializer
and training node at once. A backend knows its CSI provisioner, its StorageClass parameters, its
default mount options and the smallest volume it can create (Filestore, FSx and Azure Premium
refuse smaller claims at provisioning time; we refuse them at config time instead).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from trainer_infra.config.base import StrictModel
from trainer_infra.config.types import DnsLabel, DnsSubdomain, SemVer

GI = 1024**3
NFS_SERVER_IMAGE = "itsthenetwork/nfs-server-alpine:12"  # the image of csi-driver-nfs' own example server
AbsolutePath = Annotated[str, StringConstraints(pattern=r"^/[^\s]*$")]


class NfsDriverConfig(StrictModel):
    """The upstream NFS CSI driver (chart `csi-driver-nfs` of kubernetes-csi), installed by us unless the
    cluster already runs it."""

    install: bool = Field(default=True, description="Install the csi-driver-nfs chart (provisioner nfs.csi.k8s.io).")
    version: SemVer = Field(default="4.13.4", description="csi-driver-nfs chart version.")
    namespace: DnsLabel = Field(default="kube-system", description="Namespace of the driver (upstream default).")


class NfsInClusterServerConfig(StrictModel):
    """An NFS server inside the cluster, so the whole platform runs on a laptop cluster (kind). Its data
    sits in a hostPath on one node: fine for a sandbox, never for production."""

    enabled: bool = False
    image: str = Field(default=NFS_SERVER_IMAGE, description="NFS server image (exports one directory over NFSv4).")
    namespace: DnsLabel = Field(default="trainer-platform-storage", description="Namespace of the server.")
    host_path: AbsolutePath = Field(
        default="/var/lib/trainer-platform/nfs", description="Node directory that holds the exported data."
    )


class NfsBackend(StrictModel):
    """An NFS export (`server:share`) through the upstream NFS CSI driver; each claim is a subdirectory."""

    server: str | None = Field(default=None, description="NFS server host name or IP (omit with inClusterServer).")
    share: AbsolutePath = Field(default="/", description="Exported path.")
    mount_permissions: str | None = Field(default=None, description='chmod of each volume directory, e.g. "0775".')
    in_cluster_server: NfsInClusterServerConfig = Field(default_factory=NfsInClusterServerConfig)
    driver: NfsDriverConfig = Field(default_factory=NfsDriverConfig)


class EfsBackend(StrictModel):
    """Amazon EFS through the EFS CSI driver (`efs.csi.aws.com`, installed with the EKS add-on); each
    claim is an EFS access point."""

    file_system_id: Annotated[str, StringConstraints(pattern=r"^fs-[0-9a-f]+$")] = Field(
        description="EFS file system id, e.g. fs-0123456789abcdef0."
    )
    directory_perms: Annotated[str, StringConstraints(pattern=r"^[0-7]{3,4}$")] = Field(
        default="775", description="Permissions of each access point's root directory."
    )
    base_path: AbsolutePath | None = Field(default=None, description="Directory under which access points are made.")


class FilestoreBackend(StrictModel):
    """Google Filestore through the GKE Filestore CSI driver (`filestore.csi.storage.gke.io`)."""

    tier: Literal["standard", "premium", "enterprise", "zonal"] = "standard"
    network: str = Field(default="default", description="VPC network of the GKE cluster.")
    connect_mode: Literal["DIRECT_PEERING", "PRIVATE_SERVICE_ACCESS"] | None = None


class AzureFileBackend(StrictModel):
    """Azure Files through the Azure Files CSI driver (`file.csi.azure.com`, built into AKS)."""

    sku_name: Literal["Standard_LRS", "Standard_ZRS", "Standard_GRS", "Premium_LRS", "Premium_ZRS"] = "Premium_LRS"
    protocol: Literal["nfs", "smb"] = Field(
        default="nfs", description="NFS needs a Premium SKU; SMB works with every SKU."
    )


class LustreBackend(StrictModel):
    """A Lustre file system per claim: Amazon FSx for Lustre (`fsx.csi.aws.com`) or Google Cloud Managed
    Lustre (`lustre.csi.storage.gke.io`)."""

    provider: Literal["fsx", "gke"]
    subnet_id: str | None = Field(default=None, description="fsx: subnet of the file systems.")
    security_group_ids: list[str] = Field(default_factory=list, description="fsx: security groups.")
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = Field(
        default="PERSISTENT_2", description="fsx: durability; SCRATCH_2 loses data when a server fails."
    )
    per_unit_storage_throughput: int | None = Field(
        default=None, description="MB/s per TiB (fsx PERSISTENT_*: 125-1000; gke: 125, 250, 500 or 1000)."
    )
    network: str | None = Field(default=None, description="gke: VPC network of the cluster.")


class ExistingBackend(StrictModel):
    """A StorageClass the cluster already has (not created, changed or protected by us)."""

    class_name: DnsSubdomain = Field(description="Name of the existing ReadWriteMany StorageClass.")


Backend = NfsBackend | EfsBackend | FilestoreBackend | AzureFileBackend | LustreBackend | ExistingBackend


def provisioner(backend: Backend) -> str:
    if isinstance(backend, NfsBackend):
        return "nfs.csi.k8s.io"
    if isinstance(backend, EfsBackend):
        return "efs.csi.aws.com"
    if isinstance(backend, FilestoreBackend):
        return "filestore.csi.storage.gke.io"
    if isinstance(backend, AzureFileBackend):
        return "file.csi.azure.com"
    if isinstance(backend, LustreBackend):
        return "fsx.csi.aws.com" if backend.provider == "fsx" else "lustre.csi.storage.gke.io"
    raise ValueError("an existing StorageClass has no provisioner of ours")


def parameters(backend: Backend, nfs_server: str | None) -> dict[str, str]:
    """StorageClass `parameters` (all strings, as the API wants them)."""
    out: dict[str, str] = {}
    if isinstance(backend, NfsBackend):
        out = {"server": nfs_server or str(backend.server), "share": backend.share}
        if backend.mount_permissions:
            out["mountPermissions"] = backend.mount_permissions
    elif isinstance(backend, EfsBackend):
        out = {
            "provisioningMode": "efs-ap",
            "fileSystemId": backend.file_system_id,
            "directoryPerms": backend.directory_perms,
        }
        if backend.base_path:
            out["basePath"] = backend.base_path
    elif isinstance(backend, FilestoreBackend):
        out = {"tier": backend.tier, "network": backend.network}
        if backend.connect_mode:
            out["connect-mode"] = backend.connect_mode
    elif isinstance(backend, AzureFileBackend):
        out = {"skuName": backend.sku_name, "protocol": backend.protocol}
    elif isinstance(backend, LustreBackend):
        if backend.provider == "fsx":
            out = {"deploymentType": backend.deployment_type, "fileSystemTypeVersion": "2.15"}
            if backend.subnet_id:
                out["subnetId"] = backend.subnet_id
            if backend.security_group_ids:
                out["securityGroupIds"] = ",".join(backend.security_group_ids)
        elif backend.network:
            out["network"] = backend.network
        if backend.per_unit_storage_throughput is not None:
            out["perUnitStorageThroughput"] = str(backend.per_unit_storage_throughput)
    return dict(sorted(out.items()))


def default_mount_options(backend: Backend) -> list[str]:
    if isinstance(backend, NfsBackend):
        return ["hard", "nfsvers=4.1"]
    if isinstance(backend, AzureFileBackend) and backend.protocol == "smb":
        # Training images run as many uids: open permissions, symlinks, no byte-range locks (as AKS docs).
        return ["dir_mode=0777", "file_mode=0777", "mfsymlinks", "cache=strict", "actimeo=30", "nobrl"]
    return []


def minimum_bytes(backend: Backend) -> tuple[int, str] | None:
    """The smallest claim the backend provisions, with where that limit comes from."""
    if isinstance(backend, FilestoreBackend):
        size = {"standard": 1024, "premium": 2560, "enterprise": 1024, "zonal": 1024}[backend.tier]
        return size * GI, f"Filestore {backend.tier} instances start at {size}Gi"
    if isinstance(backend, AzureFileBackend) and backend.sku_name.startswith("Premium"):
        return 100 * GI, "Azure Files Premium shares start at 100Gi"
    if isinstance(backend, LustreBackend) and backend.provider == "fsx":
        return 1200 * GI, "FSx for Lustre file systems start at 1200Gi"
    return None
