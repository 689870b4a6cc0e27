"""Cross-field checks of `storage` and of `storage` against `teams[]`, each at its exact config path."""

from __future__ import annotations

from kubernetes.utils.quantity import parse_quantity

from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigIssue
from trainer_infra.storage import backends


def _backend_issues(backend: backends.Backend) -> list[ConfigIssue]:
    """What the CSI driver would reject at provisioning time, when a team first waits for its volume."""
    if isinstance(backend, backends.NfsBackend):
        if backend.in_cluster_server.enabled and backend.server:
            hint = "use either an external server or the in-cluster one"
            return [
                ConfigIssue("storage.nfs.server", "set together with inClusterServer.enabled", backend.server, hint)
            ]
        if not backend.in_cluster_server.enabled and not backend.server:
            hint = "give the NFS server address, or set inClusterServer.enabled: true for a sandbox"
            return [ConfigIssue("storage.nfs.server", "required key is missing", None, hint)]
    if isinstance(backend, backends.LustreBackend) and backend.provider == "fsx":
        issues = []
        if not backend.subnet_id:
            hint = "FSx for Lustre creates each file system in this subnet"
            issues.append(ConfigIssue("storage.lustre.subnetId", "required with provider fsx", None, hint))
        if backend.deployment_type.startswith("PERSISTENT") and backend.per_unit_storage_throughput is None:
            message = f"required with deploymentType {backend.deployment_type}"
            hint = "MB/s per TiB: 125, 250, 500 or 1000 for PERSISTENT_2 (50, 100 or 200 for PERSISTENT_1)"
            issues.append(ConfigIssue("storage.lustre.perUnitStorageThroughput", message, None, hint))
        return issues
    if (
        isinstance(backend, backends.AzureFileBackend)
        and backend.protocol == "nfs"
        and "Premium" not in backend.sku_name
    ):
        message = f"NFS shares need a Premium SKU, not {backend.sku_name}"
        hint = "use skuName Premium_LRS or Premium_ZRS, or protocol smb"
        return [ConfigIssue("storage.azurefile.protocol", message, "nfs", hint)]
    return []


def storage_issues(cfg: StackConfig) -> list[ConfigIssue]:
    storage = cfg.storage
    if storage is None:
        return []
    issues = _backend_issues(storage.backend)
    if storage.existing is not None and "class_name" in storage.model_fields_set:
        hint = "name the class in storage.existing.className only"
        issues.append(ConfigIssue("storage.className", "ignored with storage.existing", storage.class_name, hint))
    minimum = backends.minimum_bytes(storage.backend)
    if minimum is not None:
        least, why = minimum
        for i, team in enumerate(cfg.teams):
            if parse_quantity(team.storage.size) < least:
                message = f"expected at least {least // backends.GI}Gi"
                issues.append(ConfigIssue(f"teams[{i}].storage.size", message, team.storage.size, why))
    return issues
