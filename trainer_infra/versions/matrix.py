"""The compatibility matrix as typed data, and the check that refuses known-bad combinations."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from pydantic import Field, model_validator

from trainer_infra.core.model import StrictModel


class Release(StrictModel):
    version: str
    chart_version: str
    min_kubernetes: str
    train_job_api: str | None = None
    train_job_full_update: bool = Field(
        default=False, description="Kueue: admits a TrainJob by writing it back whole from its Go types (Update)."
    )
    crds: list[str] = Field(default_factory=list, description="CRDs the chart installs (what readiness waits for).")
    api_versions: dict[str, str] = Field(default_factory=dict, description="API group → version we write.")
    images: dict[str, str] = Field(default_factory=dict, description="The images the release runs, by role.")
    sources: list[str] = Field(min_length=1)
    feature_gates: list[str] | None = Field(
        default=None, description="Gates the controller accepts (None: not known here, not checked)."
    )
    locked_feature_gates: dict[str, bool] = Field(
        default_factory=dict, description="Gates locked to their default: another value stops the controller."
    )
    integrations: list[str] | None = Field(default=None, description="Kueue: the integration framework names.")

    def api_version(self, group: str) -> str:
        return f"{group}/{self.api_versions[group]}"


class ComponentMatrix(StrictModel):
    chart: str
    default: str = Field(description="The version installed unless the stack pins another.")
    repository: str | None = Field(default=None, description="Classic chart repository (charts not on OCI).")
    namespace: str
    releases: list[Release] = Field(min_length=1)

    @model_validator(mode="after")
    def _default_is_a_release(self) -> ComponentMatrix:
        if self.release(self.default) is None:
            raise ValueError(f"default {self.default} is not one of the releases {self.versions}")
        return self

    def release(self, version: str) -> Release | None:
        return next((r for r in self.releases if r.version == version), None)

    @property
    def default_release(self) -> Release:
        found = self.release(self.default)
        assert found is not None, "checked at load (_default_is_a_release)"
        return found

    @property
    def versions(self) -> list[str]:
        return [r.version for r in self.releases]


class KnownBad(StrictModel):
    id: str
    when: dict[str, str]
    train_job_integration: bool | None = None
    reason: str
    instead: str
    sources: list[str] = Field(min_length=1)


class UpgradePath(StrictModel):
    """An upgrade upstream says must not be taken directly (matrix.yaml, `upgradePaths`)."""

    id: str
    component: str
    from_: str = Field(alias="from", description="PEP 440 specifier of the deployed version.")
    to: str = Field(description="PEP 440 specifier of the stack's version.")
    through: str | None = Field(default=None, description="The release to upgrade to first.")
    migrate_stored_versions: dict[str, str] = Field(
        default_factory=dict, description="API group → version whose stored objects are migrated first."
    )
    reason: str
    sources: list[str] = Field(min_length=1)

    def applies(self, deployed: str, target: str) -> bool:
        return Version(deployed) in SpecifierSet(self.from_) and Version(target) in SpecifierSet(self.to)


class Matrix(StrictModel):
    components: dict[str, ComponentMatrix]
    known_bad: list[KnownBad]
    upgrade_paths: list[UpgradePath] = Field(default_factory=list)

    @model_validator(mode="after")
    def _paths_name_components(self) -> Matrix:
        for path in self.upgrade_paths:
            comp = self.components.get(path.component)
            if comp is None:
                raise ValueError(f"upgradePaths {path.id}: no component {path.component}")
            for spec in (path.from_, path.to):
                SpecifierSet(spec)  # a malformed specifier fails at load, not at the first upgrade
        return self

    @property
    def defaults(self) -> dict[str, str]:
        return {name: row.default for name, row in self.components.items()}


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
    versions: dict[str, str],
    kubernetes: str,
    train_job_integration: bool,
    paths: dict[str, str] | None = None,
) -> list[CompatFinding]:
    """Every reason the chosen versions must not be installed together (empty list: fine). `paths`: the
    config path of each component's version (default `components.<name>.version`)."""
    findings: list[CompatFinding] = []
    where = {name: f"components.{name}.version" for name in versions} | (paths or {})
    for name, version in versions.items():
        comp = MATRIX.components[name]
        release = comp.release(version)
        path = where[name]
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
    findings += _trainjob_api(versions, train_job_integration, where)
    for rule in MATRIX.known_bad:
        if rule.train_job_integration is not None and rule.train_job_integration != train_job_integration:
            continue
        if all(c in versions and Version(versions[c]) in SpecifierSet(spec) for c, spec in rule.when.items()):
            involved = ", ".join(f"{c} {versions[c]}" for c in rule.when)
            findings.append(
                CompatFinding(
                    where[next(iter(rule.when))],
                    f"known-bad combination [{rule.id}] ({involved}): {rule.reason}",
                    f"pick {rule.instead} (sources: {'; '.join(rule.sources)})",
                )
            )
    return findings


def _trainjob_api(versions: dict[str, str], integration: bool, where: dict[str, str]) -> list[CompatFinding]:
    """Kueue's TrainJob integration writes the TrainJob API its release was built against (`trainJobApi`)."""
    trainer = MATRIX.components["trainer"].release(versions.get("trainer", ""))
    kueue = MATRIX.components["kueue"].release(versions.get("kueue", ""))
    if not (integration and trainer and kueue and trainer.train_job_api and kueue.train_job_api):
        return []
    if trainer.train_job_api == kueue.train_job_api:
        return []
    matching = [r.version for r in MATRIX.components["trainer"].releases if r.train_job_api == kueue.train_job_api]
    return [
        CompatFinding(
            where["trainer"],
            f"TrainJob API mismatch [trainjob-api] (trainer {trainer.version}, kueue {kueue.version}): Kueue "
            f"{kueue.version} is built against the Trainer v{kueue.train_job_api} TrainJob API, Trainer "
            f"{trainer.version} serves v{trainer.train_job_api}; upstream: \"Trainer v2.2 and v2.3 don't have API "
            'compatibility"',
            f"pick Trainer {' or '.join(matching) or '(none in the matrix)'} with Kueue {kueue.version}, or keep "
            f"Trainer {trainer.version} and set components.kueue.trainJobIntegration: false (TrainJobs are then "
            "not queued by Kueue) (sources: the trainJobApi of each release in versions/matrix.yaml)",
        )
    ]
