"""Amazon EFS: each team claim is an EFS access point."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from trainer_infra.core.model import StrictModel
from trainer_infra.core.upstream import aws
from trainer_infra.storage.backend import AbsolutePath, StorageDefaults


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


class EfsStorage(StorageDefaults):
    name = "efs"
    settings_model = EfsBackend
    driver = aws.EFS_CSI_DRIVER

    def parameters(self, s: EfsBackend) -> dict[str, str | None]:
        ap = {"provisioningMode": "efs-ap", "fileSystemId": s.file_system_id, "directoryPerms": s.directory_perms}
        return {**ap, "basePath": s.base_path}


BACKEND = EfsStorage()
