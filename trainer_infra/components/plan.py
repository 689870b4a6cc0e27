"""Components → Helm releases in install order, each followed by its readiness gate, plus their namespaces.

Release facts come from the matrix row of the component's version (versions/matrix.yaml), resolved once
by `resolve_releases`; nothing about a component's chart, CRDs, API versions or images is written here.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer_infra.components.component import ResolvedRelease, StackView, mirrored
from trainer_infra.components.registry import COMPONENTS
from trainer_infra.core.images import mirror_chart
from trainer_infra.core.objects import HelmRelease, ManagedObject, PlanPart, ReadinessGate
from trainer_infra.manifests import meta
from trainer_infra.versions import MATRIX, CompatFinding, Release, check_compatibility


@dataclass(frozen=True)
class Releases:
    by_name: dict[str, ResolvedRelease]
    findings: list[CompatFinding]

    def namespaces(self) -> dict[str, str]:
        return {name: r.namespace for name, r in self.by_name.items()}

    def versions(self) -> dict[str, str]:
        return {name: r.app_version for name, r in self.by_name.items()}


def _release_row(name: str, version: str) -> Release:
    """The matrix row of `version`; for a version outside the matrix (allowUnsupportedVersions), the
    default row with that version in its image tags."""
    row = MATRIX.components[name]
    found = row.release(version)
    if found is not None:
        return found
    default = row.default_release
    images = {role: image.replace(default.version, version) for role, image in default.images.items()}
    return default.model_copy(update={"version": version, "chart_version": version, "images": images})


def resolve_releases(stack: StackView, kubernetes: str, train_job_integration: bool) -> Releases:
    """Every installed component's release, and what the compatibility matrix says about the set."""
    mirror, chart_mirror = stack.images.registry_mirror, stack.charts.repository_mirror
    by_name: dict[str, ResolvedRelease] = {}
    for component in COMPONENTS:
        settings = component.settings(stack)
        if settings is None:
            continue
        row = MATRIX.components[component.name]
        rel = _release_row(component.name, settings.version or MATRIX.defaults[component.name])
        chart, repository = mirror_chart(row.chart, chart_mirror), row.repository
        if repository and chart_mirror:  # mirrored under the repository's host and path, like OCI charts
            chart, repository = f"{chart_mirror.rstrip('/')}/{repository.removeprefix('https://')}/{row.chart}", None
        by_name[component.name] = ResolvedRelease(
            component=component.name,
            app_version=rel.version,
            chart_version=rel.chart_version,
            chart=chart,
            repository=repository,
            namespace=settings.namespace or row.namespace,
            crds=tuple(rel.crds),
            api_versions={group: rel.api_version(group) for group in rel.api_versions},
            images=mirrored(rel.images, mirror),
            train_job_api=rel.train_job_api,
            train_job_full_update=rel.train_job_full_update,
            feature_gates=tuple(rel.feature_gates) if rel.feature_gates is not None else None,
            locked_feature_gates=dict(rel.locked_feature_gates),
            integrations=tuple(rel.integrations) if rel.integrations is not None else None,
            install=settings.install,
        )
    versions = {name: r.app_version for name, r in by_name.items()}
    paths = {c.name: c.version_path for c in COMPONENTS if c.name in by_name}
    return Releases(by_name, check_compatibility(versions, kubernetes, train_job_integration, paths))


def components_plan(stack: StackView, releases: Releases) -> PlanPart:
    """A release per installed component; a component the cluster already runs (`install: false`) keeps only its
    readiness gate, with no release: it is checked before anything that uses its API, its chart and namespace are
    left alone."""
    mirror = stack.images.registry_mirror
    out_releases: list[HelmRelease] = []
    gates: list[ReadinessGate] = []
    objects: list[ManagedObject] = []
    for component in COMPONENTS:
        rel = releases.by_name.get(component.name)
        if rel is None:
            continue
        if rel.install:
            out_releases.append(
                HelmRelease(
                    name=component.name,
                    component=component.name,
                    chart=rel.chart,
                    chart_version=rel.chart_version,
                    namespace=rel.namespace,
                    values=component.values(stack, rel),
                    after=tuple(f"{a}-ready" for a in component.after if a in releases.by_name),
                    repository=rel.repository,
                )
            )
        probes = component.probes(rel, mirror)
        if rel.crds or probes:
            gates.append(
                ReadinessGate(
                    name=f"{component.name}-ready",
                    component=component.name,
                    release=component.name if rel.install else "",
                    crds=rel.crds,
                    probes=probes,
                    version=rel.app_version,
                    api_groups=tuple(rel.api_versions),
                    hint="" if rel.install else existing_hint(component.name, rel),
                )
            )
        if component.owns_namespace and rel.install:
            objects.append(ManagedObject(meta.namespace(rel.namespace)))
    return PlanPart(tuple(out_releases), tuple(gates), tuple(objects))


def existing_hint(name: str, rel: ResolvedRelease) -> str:
    """What a gate of a component this stack does not install says when it times out."""
    return (
        f"components.{name}.install is false: this stack expects {name} {rel.app_version} already running in "
        f"namespace {rel.namespace}, configured as `trainer-infra render` with install: true shows "
        '(docs/versions.md, "A component the cluster already runs")'
    )
