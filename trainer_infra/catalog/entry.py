"""The loaded catalog as the rest of the package reads it: every version of every runtime (`CatalogEntry`), its
metadata, and its manifest for one Trainer version. Reading and checking the files is `loader.py`."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from trainer_infra.catalog import model as m
from trainer_infra.manifests.runtime import FRAMEWORK_LABEL, images_of, pod_specs, quote_quantities

PLACEHOLDER = "${TRAINER_VERSION}"


def _substitute(value: Any, trainer_version: str) -> Any:
    if isinstance(value, str):
        return value.replace(PLACEHOLDER, trainer_version)
    if isinstance(value, dict):
        return {k: _substitute(v, trainer_version) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, trainer_version) for v in value]
    return value


@dataclass(frozen=True)
class CatalogEntry:
    """One version of one runtime, as read from its file."""

    file: str
    runtime: m.RuntimeFile
    raw: dict[str, Any]

    @property
    def name(self) -> str:
        return self.runtime.metadata.name

    @property
    def annotations(self) -> dict[str, str]:
        return self.runtime.metadata.annotations

    @property
    def version(self) -> str:
        return self.annotations[m.RUNTIME_VERSION]

    @property
    def framework(self) -> str:
        return self.runtime.metadata.labels[FRAMEWORK_LABEL]

    @property
    def deprecated(self) -> bool:
        return self.runtime.metadata.labels.get(m.SUPPORT_LABEL) == m.DEPRECATED

    @property
    def description(self) -> str:
        return self.annotations.get(m.DESCRIPTION, "")

    @property
    def requires(self) -> tuple[str, ...]:
        text = self.annotations.get(m.REQUIRES, "")
        return tuple(sorted(r.strip() for r in text.split(",") if r.strip()))

    @cached_property
    def trainer_versions(self) -> SpecifierSet:
        return SpecifierSet(self.annotations[m.TRAINER_VERSIONS])

    def supports(self, trainer_version: str) -> bool:
        return Version(trainer_version) in self.trainer_versions

    def manifest(self, trainer_version: str) -> dict[str, Any]:
        """The runtime for one Trainer version: images resolved, quantities quoted (a fresh copy)."""
        out: dict[str, Any] = _substitute(copy.deepcopy(self.raw), trainer_version)
        for _, pod in pod_specs(out):
            quote_quantities(pod)
        return out

    def images(self, trainer_version: str) -> list[str]:
        return images_of(self.manifest(trainer_version))


@dataclass(frozen=True)
class Catalog:
    version: str
    directory: str
    entries: tuple[CatalogEntry, ...]

    def names(self) -> list[str]:
        return sorted({e.name for e in self.entries})

    def versions_of(self, name: str) -> list[CatalogEntry]:
        """Every version of a runtime, newest first."""
        return sorted((e for e in self.entries if e.name == name), key=lambda e: Version(e.version), reverse=True)
