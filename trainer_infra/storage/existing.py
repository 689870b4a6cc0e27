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
    driver = None

    def class_name(self, s: ExistingBackend) -> str | None:
        return s.class_name

    def parameters(self, settings: Any) -> dict[str, str]:
        return {}


BACKEND = ExistingStorage()
