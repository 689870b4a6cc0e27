"""The NFS backend: an NFS export (`server:share`) through the upstream NFS CSI driver (chart
`csi-driver-nfs`, installed as the chart component of that name), each claim a subdirectory; for
sandboxes an NFS server inside the cluster (the same server image the driver's own examples use)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.images import mirror_image
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.types import DnsLabel, Host, ImageRef, SemVer
from trainer_infra.core.upstream import csi_driver_nfs, kubernetes
from trainer_infra.manifests import meta
from trainer_infra.storage.backend import AbsolutePath, StorageDefaults

DRIVER_RELEASE = "csi-driver-nfs"
SERVER_NAME = "nfs-server"
SERVER_LABELS = {kubernetes.APP_NAME: SERVER_NAME, kubernetes.APP_COMPONENT: "storage"}
NFS_SERVER_IMAGE = "itsthenetwork/nfs-server-alpine:12"  # the image of csi-driver-nfs' own example server


class NfsDriverConfig(StrictModel):
    """The upstream NFS CSI driver (chart `csi-driver-nfs` of kubernetes-csi), installed by us unless the
    cluster already runs it."""

    install: bool = Field(
        default=True, description=f"Install the csi-driver-nfs chart (provisioner {csi_driver_nfs.DRIVER})."
    )
    version: SemVer | None = Field(
        default=None, description="csi-driver-nfs chart version (default: the compatibility matrix's)."
    )
    namespace: DnsLabel = Field(default="kube-system", description="Namespace of the driver (upstream default).")
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra Helm values merged last (escape hatch; what you set here wins), e.g. `node.affinity` "
        "to keep the node plugin, which tolerates every taint, off nodes that never mount NFS.",
    )


class NfsInClusterServerConfig(StrictModel):
    """An NFS server inside the cluster, so the whole platform runs on a laptop cluster (kind). Its data
    sits in a hostPath on one node: fine for a sandbox, never for production."""

    enabled: bool = False
    image: ImageRef = Field(
        default=NFS_SERVER_IMAGE, description="NFS server image (exports one directory over NFSv4)."
    )
    namespace: DnsLabel = Field(default="trainer-platform-storage", description="Namespace of the server.")
    host_path: AbsolutePath = Field(
        default="/var/lib/trainer-platform/nfs", description="Node directory that holds the exported data."
    )


class NfsBackend(StrictModel):
    """An NFS export (`server:share`) through the upstream NFS CSI driver; each claim is a subdirectory."""

    server: Host | None = Field(default=None, description="NFS server host name or IP (omit with inClusterServer).")
    share: AbsolutePath = Field(default="/", description="Exported path.")
    mount_permissions: Annotated[str, StringConstraints(pattern=r"^[0-7]{3,4}$")] | None = Field(
        default=None, description='chmod of each volume directory, e.g. "0775".'
    )
    in_cluster_server: NfsInClusterServerConfig = Field(default_factory=NfsInClusterServerConfig)
    driver: NfsDriverConfig = Field(default_factory=NfsDriverConfig)


def server_address(backend: NfsBackend) -> str:
    return f"{SERVER_NAME}.{backend.in_cluster_server.namespace}.svc.cluster.local"


def in_cluster_server(backend: NfsBackend, image_mirror: str | None) -> list[ManagedObject]:
    """Namespace (privileged: an NFS server needs it), Service and a one-replica Deployment."""
    server = backend.in_cluster_server
    ns = server.namespace
    privileged = {f"{kubernetes.POD_SECURITY_PREFIX}/{m}": "privileged" for m in ("enforce", "audit", "warn")}
    ports = [
        {"name": "nfs", "port": 2049, "protocol": "TCP"},
        {"name": "rpcbind", "port": 111, "protocol": "UDP"},
    ]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta.metadata(SERVER_NAME, ns, SERVER_LABELS),
        "spec": {"type": "ClusterIP", "selector": SERVER_LABELS, "ports": ports},
    }
    container = {
        "name": SERVER_NAME,
        "image": mirror_image(server.image, image_mirror),
        "env": [{"name": "SHARED_DIRECTORY", "value": "/exports"}],
        "ports": [{"name": p["name"], "containerPort": p["port"], "protocol": p["protocol"]} for p in ports],
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "exports", "mountPath": "/exports"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta.metadata(SERVER_NAME, ns, SERVER_LABELS),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},  # two servers must never export one directory
            "selector": {"matchLabels": SERVER_LABELS},
            "template": {
                "metadata": {"labels": SERVER_LABELS},
                "spec": {
                    "nodeSelector": {kubernetes.OS_LABEL: "linux"},
                    "containers": [container],
                    "volumes": [
                        {"name": "exports", "hostPath": {"path": server.host_path, "type": "DirectoryOrCreate"}}
                    ],
                },
            },
        },
    }
    return [
        ManagedObject(meta.namespace(ns, labels=privileged)),
        ManagedObject(service),
        ManagedObject(deployment),
    ]


class NfsStorage(StorageDefaults):
    name = "nfs"
    settings_model = NfsBackend
    driver = csi_driver_nfs.DRIVER

    def parameters(self, s: NfsBackend) -> dict[str, str | None]:
        server = server_address(s) if s.in_cluster_server.enabled else str(s.server)
        return {"server": server, "share": s.share, "mountPermissions": s.mount_permissions}

    def mount_options(self, settings: Any) -> list[str]:
        return ["hard", "nfsvers=4.1"]

    def checks(self, s: NfsBackend) -> list[ConfigIssue]:
        if s.in_cluster_server.enabled and s.server:
            hint = "use either an external server or the in-cluster one"
            return [ConfigIssue("storage.nfs.server", "set together with inClusterServer.enabled", s.server, hint)]
        if not s.in_cluster_server.enabled and not s.server:
            hint = "give the NFS server address, or set inClusterServer.enabled: true for a sandbox"
            return [ConfigIssue("storage.nfs.server", "required key is missing", None, hint)]
        return []

    def objects(self, settings: Any, mirror: str | None) -> list[ManagedObject]:
        s: NfsBackend = settings
        return in_cluster_server(s, mirror) if s.in_cluster_server.enabled else []

    def after(self, settings: Any, objects: list[ManagedObject]) -> tuple[str, ...]:
        s: NfsBackend = settings
        driver = (DRIVER_RELEASE,) if s.driver.install else ()
        return driver + tuple(o.key for o in objects if o.manifest["kind"] == "Deployment")


BACKEND = NfsStorage()
