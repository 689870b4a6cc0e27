"""The compatibility matrix as typed data, and the check that refuses known-bad combinations."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Literal

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from pydantic import Field

from trainer_infra.config.base import StrictModel

Component = Literal["jobset", "trainer", "kueue"]
COMPONENTS: tuple[Component, ...] = ("jobset", "trainer", "kueue")


class Release(StrictModel):
    version: str
    chart_version: str
    min_kubernetes: str
    train_job_api: str | None = None
    sources: list[str] = Field(min_length=1)


class ComponentMatrix(StrictModel):
    chart: str
    namespace: str
    releases: list[Release] = Field(min_length=1)

    def release(self, version: str) -> Release | None:
        return next((r for r in self.releases if r.version == version), None)

    @property
    def versions(self) -> list[str]:
        return [r.version for r in self.releases]


class KnownBad(StrictModel):
    id: str
    when: dict[Component, str]
    train_job_integration: bool | None = None
    reason: str
    instead: str
    sources: list[str] = Field(min_length=1)


class Matrix(StrictModel):
    components: dict[Component, ComponentMatrix]
    defaults: dict[Component, str]
    known_bad: list[KnownBad]


def _load() -> Matrix:
    text = resources.files("trainer_infra.versions").joinpath("matrix.yaml").read_text()
    return Matrix.model_validate(yaml.safe_load(text))


MATRIX = _load()


@dataclass(frozen=True)
class CompatFinding:
    """A refused combination: the config path to change, why, and what to pick instead."""

    path: str
    message: str
    hint: str


def _minor(version: str) -> tuple[int, int]:
    v = Version(version)
    return (v.major, v.minor)


def check_compatibility(
    versions: dict[Component, str],
    kubernetes: str,
    train_job_integration: bool,
) -> list[CompatFinding]:
    """Every reason the chosen versions must not be installed together (empty list: fine)."""
    findings: list[CompatFinding] = []
    for name, version in versions.items():
        comp = MATRIX.components[name]
        release = comp.release(version)
        path = f"components.{name}.version"
        if release is None:
            findings.append(
                CompatFinding(
                    path,
                    f"{name} {version} is not in the compatibility matrix",
                    f"supported: {', '.join(comp.versions)}",
                )
            )
            continue
        if _minor(kubernetes) < _minor(release.min_kubernetes):
            findings.append(
                CompatFinding(
                    "kubernetes.version",
                    f"Kubernetes {kubernetes} is below the minimum {release.min_kubernetes} of {name} {version}",
                    f"upgrade the cluster to >= {release.min_kubernetes} or pick an older {name}",
                )
            )
    for rule in MATRIX.known_bad:
        if rule.train_job_integration is not None and rule.train_job_integration != train_job_integration:
            continue
        if all(c in versions and Version(versions[c]) in SpecifierSet(spec) for c, spec in rule.when.items()):
            involved = ", ".join(f"{c} {versions[c]}" for c in rule.when)
            findings.append(
                CompatFinding(
                    f"components.{next(iter(rule.when))}.version",
                    f"known-bad combination [{rule.id}] ({involved}): {rule.reason}",
                    f"pick {rule.instead} (sources: {'; '.join(rule.sources)})",
                )
            )
    return findings
