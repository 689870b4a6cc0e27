"""Checks of `storage` and of `storage` against `teams[]`, each at its exact config path."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.quantity import quantity
from trainer_infra.storage.backend import GI
from trainer_infra.storage.config import StorageConfig
from trainer_infra.tenancy.teams import TeamConfig


def check_storage(storage: StorageConfig | None, teams: Sequence[TeamConfig]) -> list[ConfigIssue]:
    if storage is None:
        return []
    backend, settings = storage.backend, storage.settings
    issues = backend.checks(settings)
    if backend.provisioner(settings) is None and "class_name" in storage.model_fields_set:
        hint = f"name the class in storage.{backend.name}.className only"
        issues.append(
            ConfigIssue("storage.className", f"ignored with storage.{backend.name}", storage.class_name, hint)
        )
    minimum = backend.minimum_bytes(settings)
    if minimum is not None:
        least, why = minimum
        for i, team in enumerate(teams):
            if quantity(team.storage.size) < least:
                message = f"expected at least {least // GI}Gi"
                issues.append(ConfigIssue(f"teams[{i}].storage.size", message, team.storage.size, why))
    return issues
