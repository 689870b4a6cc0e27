"""A StorageClass the cluster already has (not created, changed or protected by us)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsSubdomain
from trainer_infra.storage.backend import StorageDefaults


class ExistingBackend(StrictModel):
    """A StorageClass the cluster already has (not created, changed or protected by us)."""

    class_name: DnsSubdomain = Field(description="Name of the existing ReadWriteMany StorageClass.")


class ExistingStorage(StorageDefaults):
    name = "existing"
    settings_model = ExistingBackend

    def provisioner(self, settings: Any) -> str | None:
        return None

    def class_name(self, settings: Any) -> str | None:
        s: ExistingBackend = settings
        return s.class_name

    def parameters(self, settings: Any) -> dict[str, str]:
        return {}


BACKEND = ExistingStorage()
