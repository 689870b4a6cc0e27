"""A StorageClass the cluster already has (not created, changed or protected by us)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.types import DnsSubdomain


class ExistingBackend(StrictModel):
    """A StorageClass the cluster already has (not created, changed or protected by us)."""

    class_name: DnsSubdomain = Field(description="Name of the existing ReadWriteMany StorageClass.")


class ExistingStorage:
    name = "existing"
    settings_model = ExistingBackend

    def provisioner(self, settings: Any) -> str | None:
        return None

    def class_name(self, settings: Any) -> str | None:
        s: ExistingBackend = settings
        return s.class_name

    def parameters(self, settings: Any) -> dict[str, str]:
        return {}

    def mount_options(self, settings: Any) -> list[str]:
        return []

    def minimum_bytes(self, settings: Any) -> tuple[int, str] | None:
        return None

    def checks(self, settings: Any) -> list[ConfigIssue]:
        return []

    def objects(self, settings: Any, mirror: str | None) -> list[ManagedObject]:
        return []

    def after(self, settings: Any, objects: list[ManagedObject]) -> tuple[str, ...]:
        return ()


BACKEND = ExistingStorage()
