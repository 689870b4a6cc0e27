"""Stack config + catalog → the runtimes a stack serves, as protected ManagedObjects.

Per enabled runtime: the stable name (the catalog version chosen by `runtimes.versions`, default the
newest that supports the selected Trainer version), optionally every catalog version as `<name>-v<version>`,
and team-scoped TrainingRuntimes. Overrides apply first, then the platform injections (plan/injections.py)
in their fixed order. Every reference in `runtimes:` is checked with its exact config path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainer_infra.catalog import model as m
from trainer_infra.catalog.config import RuntimeOverride
from trainer_infra.catalog.loader import Catalog, CatalogEntry, containers, load_catalog, pod_specs
from trainer_infra.errors import ConfigError, ConfigIssue, did_you_mean
from trainer_infra.manifests import meta
from trainer_infra.plan.injections import apply_injections
from trainer_infra.plan.model import ManagedObject, PlanPart

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig

CATALOG_VERSION = f"{m.DOMAIN}/catalog-version"
RUNTIME = f"{m.DOMAIN}/runtime"
TRAINER_API = f"{m.DOMAIN}/trainer-api-version"
TEAM = f"{m.DOMAIN}/team"


@dataclass(frozen=True)
class Served:
    """One runtime object the stack creates."""

    entry: CatalogEntry
    name: str
    kind: str = "ClusterTrainingRuntime"
    namespace: str | None = None
    override: RuntimeOverride = field(default_factory=RuntimeOverride)
    team: str | None = None
    pinned: bool = False


@dataclass(frozen=True)
class Selection:
    served: tuple[Served, ...]
    skipped: dict[str, str]  # catalog runtime name → why this stack does not serve it


# The one place that knows where the data cache is switched on (runtimes requiring `data-cache`).
DATA_CACHE_SETTING = "components.trainer.dataCache.enabled"


def _features(cfg: StackConfig) -> set[str]:
    return {"data-cache"} if cfg.components.trainer.data_cache.enabled else set()


def _why_not(entry: CatalogEntry, trainer: str, features: set[str]) -> str | None:
    if not entry.supports(trainer):
        return f"{entry.name} {entry.version} targets Trainer {entry.trainer_versions}, not {trainer}"
    missing = [f for f in entry.requires if f not in features]
    if missing:
        return f"{entry.name} needs {', '.join(missing)} (set {DATA_CACHE_SETTING}: true)"
    return None


def _unknown(path: str, name: str, catalog: Catalog) -> ConfigIssue:
    hint = did_you_mean(name, catalog.names()) or "catalog: " + ", ".join(catalog.names())
    return ConfigIssue(path, "no such runtime in the catalog", name, hint)


def select(cfg: StackConfig, catalog: Catalog) -> Selection:
    rc = cfg.runtimes
    trainer = cfg.components.resolved_versions()["trainer"]
    features = _features(cfg)
    issues: list[ConfigIssue] = []
    names = set(catalog.names())

    chosen: dict[str, CatalogEntry] = {}
    for name in catalog.names():
        versions = catalog.versions_of(name)
        pinned = rc.versions.get(name)
        if pinned is not None:
            match = [e for e in versions if e.version == pinned]
            if not match:
                have = ", ".join(e.version for e in versions)
                issues.append(
                    ConfigIssue(f"runtimes.versions.{name}", "no such version", pinned, f"catalog has {have}")
                )
                continue
            chosen[name] = match[0]
        else:
            chosen[name] = next((e for e in versions if e.supports(trainer)), versions[0])
    issues += [_unknown(f"runtimes.versions.{n}", n, catalog) for n in rc.versions if n not in names]
    issues += [_unknown(f"runtimes.overrides.{n}", n, catalog) for n in rc.overrides if n not in names]

    skipped: dict[str, str] = {}
    if rc.enabled is None:
        enabled = []
        for name, entry in chosen.items():
            reason = _why_not(entry, trainer, features)
            if reason:
                skipped[name] = reason
            else:
                enabled.append(name)
    else:
        enabled = []
        for i, name in enumerate(rc.enabled):
            if name not in names:
                issues.append(_unknown(f"runtimes.enabled[{i}]", name, catalog))
            elif name in enabled:
                issues.append(ConfigIssue(f"runtimes.enabled[{i}]", "listed twice", name))
            elif name in chosen:
                reason = _why_not(chosen[name], trainer, features)
                if reason:
                    issues.append(ConfigIssue(f"runtimes.enabled[{i}]", "cannot be served by this stack", name, reason))
                enabled.append(name)
        skipped = {n: "not in runtimes.enabled" for n in chosen if n not in enabled}
    for i, name in enumerate(rc.retiring):
        if name not in enabled:
            hint = "a retiring runtime stays enabled for one more `pulumi up`; remove it from both lists afterwards"
            issues.append(ConfigIssue(f"runtimes.retiring[{i}]", "not an enabled runtime", name, hint))

    served = [Served(chosen[n], n, override=rc.overrides.get(n, RuntimeOverride())) for n in sorted(enabled)]
    if rc.versioned_names:
        for n in sorted(enabled):
            for e in catalog.versions_of(n):
                if e.supports(trainer):
                    served.append(
                        Served(e, f"{n}-v{e.version}", override=rc.overrides.get(n, RuntimeOverride()), pinned=True)
                    )
    teams = {t.name: t for t in cfg.teams}
    for i, tr in enumerate(rc.teams):
        team = teams.get(tr.team)
        if team is None:
            hint = did_you_mean(tr.team, teams) or "teams: " + (", ".join(teams) or "none defined")
            issues.append(ConfigIssue(f"runtimes.teams[{i}].team", "no such team in teams[]", tr.team, hint))
        if tr.runtime not in names:
            issues.append(_unknown(f"runtimes.teams[{i}].runtime", tr.runtime, catalog))
        elif (reason := _why_not(chosen[tr.runtime], trainer, features)) is not None:
            issues.append(
                ConfigIssue(f"runtimes.teams[{i}].runtime", "cannot be served by this stack", tr.runtime, reason)
            )
        elif team is not None:
            served.append(
                Served(
                    chosen[tr.runtime],
                    tr.name or tr.runtime,
                    "TrainingRuntime",
                    team.resolved_namespace,
                    tr.overrides,
                    team.name,
                )
            )
    if issues:
        raise ConfigError(issues, "runtimes")
    return Selection(tuple(served), skipped)


def _apply_override(runtime: dict[str, Any], override: RuntimeOverride) -> None:
    if override.num_nodes is not None:
        runtime["spec"]["mlPolicy"]["numNodes"] = override.num_nodes
    for _, pod in pod_specs(runtime):
        for _, c in containers(pod):
            if c.get("name") != "node":
                continue
            if override.image is not None:
                c["image"] = override.image
            if override.resources is not None:
                c["resources"] = override.resources.as_k8s()


def build_runtime(cfg: StackConfig, catalog: Catalog, served: Served) -> dict[str, Any]:
    """The manifest of one served runtime: catalog entry → version-resolved → overrides → injections."""
    trainer = cfg.components.resolved_versions()["trainer"]
    entry = served.entry
    runtime = entry.manifest(trainer)
    _apply_override(runtime, served.override)
    source = entry.runtime.metadata
    labels = dict(source.labels)
    labels.update({CATALOG_VERSION: catalog.version, m.RUNTIME_VERSION: entry.version, RUNTIME: entry.name})
    if entry.name in cfg.runtimes.retiring:
        labels[m.SUPPORT_LABEL] = m.DEPRECATED
    if served.team:
        labels[TEAM] = served.team
    annotations = {k: v for k, v in source.annotations.items() if k != m.TRAINER_VERSIONS}
    annotations[TRAINER_API] = trainer
    runtime["kind"] = served.kind
    runtime["metadata"] = meta.metadata(served.name, served.namespace, labels, annotations)
    return apply_injections(cfg, runtime)


def catalog_plan(cfg: StackConfig) -> PlanPart:
    catalog = load_catalog()
    selection = select(cfg, catalog)
    objects = []
    for served in selection.served:
        # Running TrainJobs reference runtimes by name: never delete one by accident. Retained in the
        # cluster when dropped from the program, and protected unless it is retiring (or data loss is allowed).
        unprotected = cfg.allow_data_loss or served.entry.name in cfg.runtimes.retiring
        objects.append(
            ManagedObject(build_runtime(cfg, catalog, served), protect=not unprotected, retain_on_delete=True)
        )
    return PlanPart(objects=tuple(objects))
