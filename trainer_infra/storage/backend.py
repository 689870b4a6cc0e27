"""The contract of a storage backend. A backend is one module exporting `BACKEND` plus one line in
storage/registry.py; mypy checks the module's object against this Protocol there.

Every backend serves ReadWriteMany volumes, so one claim per team can be mounted by every initializer
and training node at once. A backend knows its CSI provisioner, its StorageClass parameters, its
default mount options and the smallest volume it can create (Filestore, FSx and Azure Premium refuse
smaller claims at provisioning time; we refuse them at config time instead).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator

from trainer_infra.core import kube
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject

GI = 1024**3


def _absolute(path: str) -> str:
    """The API server refuses `..` in mount and hostPath paths (validatePathNoBacksteps); empty and `.` segments
    are dropped (`/data/` is `/data`), so one directory has one spelling."""
    problem = kube.path_problem(path) or ("must not contain white space" if any(c.isspace() for c in path) else None)
    if problem is not None:
        raise ValueError(f"{problem}, e.g. /data")
    return "/" + "/".join(part for part in path.split("/") if part not in ("", "."))


AbsolutePath = Annotated[str, AfterValidator(_absolute)]


class StorageBackend(Protocol):
    @property
    def name(self) -> str:
        """The key under `storage:` that selects this backend."""

    @property
    def settings_model(self) -> type[StrictModel]:
        """The model of `storage.<name>`."""

    def provisioner(self, settings: Any) -> str | None:
        """The CSI provisioner of the StorageClass we create; None when the class exists already."""

    def class_name(self, settings: Any) -> str | None:
        """The name of an existing class to use instead of ours (None: ours, `storage.className`)."""

    def parameters(self, settings: Any) -> Mapping[str, str | None]:
        """StorageClass `parameters` (all strings, as the API wants them; None: left out)."""

    def mount_options(self, settings: Any) -> list[str]:
        """Mount options when `storage.mountOptions` is not set."""

    def minimum_bytes(self, settings: Any) -> tuple[int, str] | None:
        """The smallest claim the backend provisions, with where that limit comes from."""

    def checks(self, settings: Any) -> list[ConfigIssue]:
        """What the CSI driver would reject at provisioning time, with paths under `storage.<name>`."""

    def objects(self, settings: Any, mirror: str | None) -> list[ManagedObject]:
        """Objects the backend runs in the cluster (e.g. a sandbox NFS server)."""

    def after(self, settings: Any, objects: list[ManagedObject]) -> tuple[str, ...]:
        """Releases or objects (by key) the StorageClass and claims must wait for."""


class StorageDefaults:
    """What most backends do: a StorageClass of ours, no extra mount options, no minimum size, no checks beyond
    the settings model, nothing running in the cluster. A backend overrides what differs."""

    #: The CSI driver our StorageClass names (None: the class exists already); a backend whose driver follows
    #: its settings overrides `provisioner` instead.
    driver: str | None

    def provisioner(self, settings: Any) -> str | None:
        return self.driver

    def class_name(self, settings: Any) -> str | None:
        return None

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
