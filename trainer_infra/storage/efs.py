"""Amazon EFS: each team claim is an EFS access point."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.storage.backend import AbsolutePath


class EfsBackend(StrictModel):
    """Amazon EFS through the EFS CSI driver (`efs.csi.aws.com`, installed with the EKS add-on); each
    claim is an EFS access point."""

    file_system_id: Annotated[str, StringConstraints(pattern=r"^fs-[0-9a-f]+$")] = Field(
        description="EFS file system id, e.g. fs-0123456789abcdef0."
    )
    directory_perms: Annotated[str, StringConstraints(pattern=r"^[0-7]{3,4}$")] = Field(
        default="775", description="Permissions of each access point's root directory."
    )
    base_path: AbsolutePath | None = Field(default=None, description="Directory under which access points are made.")


class EfsStorage:
    name = "efs"
    settings_model = EfsBackend

    def provisioner(self, settings: Any) -> str | None:
        return "efs.csi.aws.com"

    def class_name(self, settings: Any) -> str | None:
        return None

    def parameters(self, settings: Any) -> dict[str, str]:
        s: EfsBackend = settings
        out = {"provisioningMode": "efs-ap", "fileSystemId": s.file_system_id, "directoryPerms": s.directory_perms}
        if s.base_path:
            out["basePath"] = s.base_path
        return dict(sorted(out.items()))

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


BACKEND = EfsStorage()
