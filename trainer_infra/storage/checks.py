"""Checks of `storage` and of `storage` against `teams[]`, each at its exact config path."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.quantity import quantity
from trainer_infra.storage.backend import GI
from trainer_infra.storage.config import StorageConfig
from trainer_infra.teams.model import TeamConfig

# Settings of the StorageClass the platform creates (none with an existing class).
CLASS_FIELDS = ("class_name", "reclaim_policy", "volume_binding_mode", "allow_volume_expansion", "mount_options")


def check_storage(storage: StorageConfig | None, teams: Sequence[TeamConfig]) -> list[ConfigIssue]:
    if storage is None:
        hint = "set storage (a backend) to give every team a claim, or drop teams[].storage"
        return [
            ConfigIssue(f"teams[{i}].storage", "has no effect without storage at the root", None, hint)
            for i, team in enumerate(teams)
            if "storage" in team.model_fields_set
        ]
    backend, settings = storage.backend, storage.settings
    issues = backend.checks(settings)
    if backend.provisioner(settings) is None:  # an existing StorageClass: we create no class to configure
        for field in CLASS_FIELDS:
            if field in storage.model_fields_set:
                key = type(storage).model_fields[field].alias or field
                hint = "it is a setting of the StorageClass we create; the existing class keeps its own"
                if field == "class_name":
                    hint = f"name the class in storage.{backend.name}.className only"
                issues.append(ConfigIssue(f"storage.{key}", f"ignored with storage.{backend.name}", None, hint))
    minimum = backend.minimum_bytes(settings)
    if minimum is not None:
        least, why = minimum
        for i, team in enumerate(teams):
            if quantity(team.storage.size) < least:
                message = f"expected at least {least // GI}Gi"
                issues.append(ConfigIssue(f"teams[{i}].storage.size", message, team.storage.size, why))
    return issues


#: Directories the images themselves need: the claim mounted at, inside or above one hides what is there.
SYSTEM_DIRS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/sys",
    "/usr", "/var",
)  # fmt: skip


def _nested(a: str, b: str) -> bool:
    """One path is the other or lies inside it."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def check_mount_path(storage: StorageConfig | None, taken: Mapping[str, str]) -> list[ConfigIssue]:
    """`storage.mountPath` (absolute, without `..`: the model) is where every runtime container sees the
    claim, so it may not hide a directory of the image nor meet a mount the platform adds (`taken`: path → what
    mounts there)."""
    if storage is None:
        return []
    path = posixpath.normpath(storage.mount_path)
    hint = "a directory of its own, e.g. /workspace (the default) or /data"
    if path in ("/", "//"):
        return [ConfigIssue("storage.mountPath", "the claim would hide the container's whole filesystem", path, hint)]
    for system in SYSTEM_DIRS:
        if _nested(path, system):
            message = f"the claim would hide or sit inside {system}, which the images need"
            return [ConfigIssue("storage.mountPath", message, storage.mount_path, hint)]
    for other, what in taken.items():
        if _nested(path, other):
            message = f"meets {other}, where the platform mounts {what}"
            return [ConfigIssue("storage.mountPath", message, storage.mount_path, hint)]
    return []
