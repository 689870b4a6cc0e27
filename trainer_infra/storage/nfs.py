"""The NFS backend's moving parts: the upstream NFS CSI driver chart, and for sandboxes an NFS server
inside the cluster (the same server image the driver's own examples use)."""

from __future__ import annotations

from typing import Any

from trainer_infra.config.images import mirror_image
from trainer_infra.controllers.common import split_image
from trainer_infra.manifests import meta
from trainer_infra.plan.model import HelmRelease, ManagedObject
from trainer_infra.storage.backends import NfsBackend

CHART = "csi-driver-nfs"
CHART_REPOSITORY = "https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts"
RELEASE = "csi-driver-nfs"
SERVER_NAME = "nfs-server"
SERVER_LABELS = {"app.kubernetes.io/name": SERVER_NAME, "app.kubernetes.io/component": "storage"}


def driver_release(backend: NfsBackend, image_mirror: str | None, chart_mirror: str | None) -> HelmRelease:
    """csi-driver-nfs from its classic Helm repository, or from the OCI chart mirror when one is set
    (mirrored under the repository's host and path, like every other chart)."""
    values: dict[str, Any] = {"storageClass": {"create": False}}  # we own the StorageClass
    if image_mirror:
        plugin = f"registry.k8s.io/sig-storage/nfsplugin:v{backend.driver.version}"
        nfs_repo, _ = split_image(mirror_image(plugin, image_mirror))
        # The chart joins `baseRepo` with each sidecar's path (`/sig-storage/csi-provisioner`).
        values["image"] = {"baseRepo": f"{image_mirror.rstrip('/')}/registry.k8s.io", "nfs": {"repository": nfs_repo}}
    if chart_mirror:
        path = CHART_REPOSITORY.removeprefix("https://")
        chart, repository = f"{chart_mirror.rstrip('/')}/{path}/{CHART}", None
    else:
        chart, repository = CHART, CHART_REPOSITORY
    return HelmRelease(
        name=RELEASE,
        component="csi-driver-nfs",
        chart=chart,
        version=backend.driver.version,
        namespace=backend.driver.namespace,
        values=values,
        repository=repository,
    )


def server_address(backend: NfsBackend) -> str:
    return f"{SERVER_NAME}.{backend.in_cluster_server.namespace}.svc.cluster.local"


def in_cluster_server(backend: NfsBackend, image_mirror: str | None) -> list[ManagedObject]:
    """Namespace (privileged: an NFS server needs it), Service and a one-replica Deployment."""
    server = backend.in_cluster_server
    ns = server.namespace
    privileged = {f"pod-security.kubernetes.io/{m}": "privileged" for m in ("enforce", "audit", "warn")}
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
                    "nodeSelector": {"kubernetes.io/os": "linux"},
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
