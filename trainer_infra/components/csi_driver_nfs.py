"""The upstream NFS CSI driver (chart `csi-driver-nfs` of kubernetes-csi), installed for the `nfs` storage
backend unless `storage.nfs.driver.install` is false (the cluster already runs it). Its settings live with
the backend (`storage.nfs.driver`); the StorageClass is ours, so the chart's stays off."""

from __future__ import annotations

from typing import Any

from trainer_infra.components.component import ComponentSettings, ResolvedRelease, StackView
from trainer_infra.components.settings import deep_merge
from trainer_infra.core.images import split_image
from trainer_infra.core.upstream import kubernetes
from trainer_infra.observability.facts import MetricsEndpoint
from trainer_infra.storage.nfs import NfsBackend


class CsiDriverNfs:
    name = "csi-driver-nfs"
    settings_model = None
    version_path = "storage.nfs.driver.version"
    after: tuple[str, ...] = ()
    owns_namespace = False  # kube-system by default, like upstream

    def settings(self, stack: StackView) -> ComponentSettings | None:
        backend = stack.storage.settings if stack.storage is not None else None
        if isinstance(backend, NfsBackend) and backend.driver.install:
            return backend.driver
        return None

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        values: dict[str, Any] = {"storageClass": {"create": False}}  # we own the StorageClass
        mirror = stack.images.registry_mirror
        if mirror:
            nfs_repo, _ = split_image(release.image("nfs"))
            # The chart joins `baseRepo` with each sidecar's path (`/sig-storage/csi-provisioner`).
            base = f"{mirror.rstrip('/')}/{kubernetes.REGISTRY}"
            values["image"] = {"baseRepo": base, "nfs": {"repository": nfs_repo}}
        backend = stack.storage.settings if stack.storage is not None else None
        return deep_merge(values, backend.driver.values) if isinstance(backend, NfsBackend) else values

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint | None:
        return None  # a node plugin without controller metrics worth alerting on

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return ()


COMPONENT = CsiDriverNfs()
