"""Cross-field checks of `storage` against `teams[]`, each reported at the exact config path."""

from __future__ import annotations

from kubernetes.utils.quantity import parse_quantity

from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigIssue
from trainer_infra.storage import backends


def storage_issues(cfg: StackConfig) -> list[ConfigIssue]:
    storage = cfg.storage
    if storage is None:
        return []
    issues: list[ConfigIssue] = []
    backend = storage.backend
    if isinstance(backend, backends.NfsBackend):
        in_cluster = backend.in_cluster_server.enabled
        if in_cluster and backend.server:
            issues.append(
                ConfigIssue(
                    "storage.nfs.server",
                    "set together with inClusterServer.enabled",
                    backend.server,
                    "use either an external server or the in-cluster one",
                )
            )
        if not in_cluster and not backend.server:
            issues.append(
                ConfigIssue(
                    "storage.nfs.server",
                    "required key is missing",
                    None,
                    "give the NFS server address, or set inClusterServer.enabled: true for a sandbox",
                )
            )
    if isinstance(backend, backends.LustreBackend) and backend.provider == "fsx" and not backend.subnet_id:
        issues.append(
            ConfigIssue(
                "storage.lustre.subnetId",
                "required with provider fsx",
                None,
                "FSx for Lustre creates each file system in this subnet",
            )
        )
    if storage.existing is not None and "class_name" in storage.model_fields_set:
        issues.append(
            ConfigIssue(
                "storage.className",
                "ignored with storage.existing",
                storage.class_name,
                "name the class in storage.existing.className only",
            )
        )
    minimum = backends.minimum_bytes(backend)
    if minimum is not None:
        least, why = minimum
        for i, team in enumerate(cfg.teams):
            if parse_quantity(team.storage.size) < least:
                issues.append(
                    ConfigIssue(
                        f"teams[{i}].storage.size",
                        f"expected at least {least // backends.GI}Gi",
                        team.storage.size,
                        why,
                    )
                )
    return issues
