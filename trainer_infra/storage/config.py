"""`storage` in stack config: where team data lives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from trainer_infra.core.model import StrictModel
from trainer_infra.core.registry import model_with_settings
from trainer_infra.core.types import DnsLabel, DnsSubdomain
from trainer_infra.storage.backend import AbsolutePath, StorageBackend
from trainer_infra.storage.files import FilesConfig
from trainer_infra.storage.registry import BACKENDS


class Storage(StrictModel):
    """Shared ReadWriteMany storage: one backend (exactly one of the backend keys), one StorageClass,
    and in every team namespace one claim named `claimName`, mounted at `mountPath` by every runtime."""

    class_name: DnsSubdomain = Field(
        default="trainer-platform-shared", description="StorageClass we create (ignored with `existing`)."
    )
    reclaim_policy: Literal["Retain", "Delete"] = Field(
        default="Retain", description="Retain keeps a volume's data when its claim is deleted."
    )
    volume_binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"
    allow_volume_expansion: bool = Field(default=True, description="Let `teams[].storage.size` grow in place.")
    mount_options: list[str] | None = Field(default=None, description="Mount options (default: the backend's).")
    claim_name: DnsLabel = Field(
        default="workspace", description="Name of the team claim in every team namespace (runtimes mount it by name)."
    )
    mount_path: AbsolutePath = Field(
        default="/workspace",
        description="Where initializers and trainers see their job's directory of the team claim. Every runtime "
        "follows it; runtimes with the upstream initializers (torchtune) are served only with /workspace, the "
        "path those images write to.",
    )
    files: FilesConfig = Field(default_factory=FilesConfig)

    @model_validator(mode="after")
    def _exactly_one_backend(self) -> Storage:
        chosen = [b.name for b in BACKENDS if getattr(self, b.name, None) is not None]
        if len(chosen) != 1:
            found = ", ".join(chosen) or "none"
            raise ValueError(f"exactly one backend key ({', '.join(BACKENDS.names())}); found {found}")
        return self

    @property
    def backend(self) -> StorageBackend:
        return next(b for b in BACKENDS if getattr(self, b.name, None) is not None)

    @property
    def settings(self) -> Any:
        """The chosen backend's settings block (`storage.<backend>`)."""
        return getattr(self, self.backend.name)

    @property
    def storage_class_name(self) -> str:
        return self.backend.class_name(self.settings) or self.class_name


if TYPE_CHECKING:
    StorageConfig = Storage
else:
    StorageConfig = model_with_settings(
        "StorageConfig", Storage, {b.name: (b.settings_model | None, None) for b in BACKENDS}
    )
