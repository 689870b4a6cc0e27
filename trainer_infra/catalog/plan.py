"""Stack config + catalog → the runtimes a stack serves, as protected ManagedObjects.

Per enabled runtime: the stable name (the catalog version chosen by `runtimes.versions`, default the
newest that supports the selected Trainer version), optionally every catalog version as `<name>-v<version>`,
and team-scoped TrainingRuntimes. Overrides apply first, then the platform injections (catalog/injections.py)
in their fixed order. Every reference in `runtimes:` is checked with its exact config path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainer_infra.catalog import model as m
from trainer_infra.catalog.config import SDK_DEVICES, RuntimeOverride, RuntimesConfig, sdk_knows_device
from trainer_infra.catalog.entry import Catalog, CatalogEntry
from trainer_infra.catalog.injections import RuntimeFacts, apply_injections
from trainer_infra.core.errors import ConfigError, ConfigIssue, did_you_mean
from trainer_infra.core.objects import ManagedObject, PlanPart
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.datacache.pinned import IMAGE_ENV, cache_image, pinned_env
from trainer_infra.manifests import meta
from trainer_infra.manifests.pod_walk import containers
from trainer_infra.manifests.runtime import ancestor, pod_spec, pod_specs, replicated_jobs
from trainer_infra.storage.injection import RUNTIME_WORKSPACE, VOLUME, fixed_workspace, workspace_disagreement
from trainer_infra.teams.model import TeamConfig

CATALOG_VERSION = f"{m.DOMAIN}/catalog-version"
RUNTIME = f"{m.DOMAIN}/runtime"
TRAINER_API = f"{m.DOMAIN}/trainer-api-version"
TEAM = f"{m.DOMAIN}/team"


WhyNot = Callable[[CatalogEntry], "str | None"]


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


@dataclass(frozen=True)
class ServeContext:
    """What building a served runtime needs from the stack, resolved once."""

    trainer: str  # the installed Trainer version
    runtimes: RuntimesConfig
    data_cache: DataCacheConfig
    facts: RuntimeFacts
    allow_data_loss: bool = False


# The one place that knows where the data cache is switched on (runtimes requiring `data-cache`).
DATA_CACHE_SETTING = "dataCache.enabled"
MOUNT_PATH_SETTING = "storage.mountPath"


def features(data_cache: DataCacheConfig) -> set[str]:
    return {"data-cache"} if data_cache.enabled else set()


def _why_not(entry: CatalogEntry, trainer: str, features: set[str], mount_path: str | None) -> str | None:
    if not entry.supports(trainer):
        return f"{entry.name} {entry.version} targets Trainer {entry.trainer_versions}, not {trainer}"
    missing = [f for f in entry.requires if f not in features]
    if missing:
        return f"{entry.name} needs {', '.join(missing)} (set {DATA_CACHE_SETTING}: true)"
    if mount_path not in (None, RUNTIME_WORKSPACE) and (fixed := fixed_workspace(entry.raw)):
        return (
            f"{entry.name} runs the upstream initializers ({', '.join(fixed)}), which write to "
            f"{RUNTIME_WORKSPACE}/dataset and {RUNTIME_WORKSPACE}/model whatever the mount: it needs "
            f"{MOUNT_PATH_SETTING} {RUNTIME_WORKSPACE}, not {mount_path}"
        )
    return None


def _unknown(path: str, name: str, catalog: Catalog) -> ConfigIssue:
    hint = did_you_mean(name, catalog.names()) or "catalog: " + ", ".join(catalog.names())
    return ConfigIssue(path, "no such runtime in the catalog", name, hint)


def _chosen_versions(
    rc: RuntimesConfig, catalog: Catalog, trainer: str, issues: list[ConfigIssue]
) -> dict[str, CatalogEntry]:
    """Per runtime, the catalog version its stable name serves: the pin, else the newest supported."""
    chosen: dict[str, CatalogEntry] = {}
    for name in catalog.names():
        versions = catalog.versions_of(name)
        pinned = rc.versions.get(name)
        if pinned is None:
            chosen[name] = next((e for e in versions if e.supports(trainer)), versions[0])
        elif match := [e for e in versions if e.version == pinned]:
            chosen[name] = match[0]
        else:
            have = ", ".join(e.version for e in versions)
            issues.append(ConfigIssue(f"runtimes.versions.{name}", "no such version", pinned, f"catalog has {have}"))
    return chosen


def _enabled(
    rc: RuntimesConfig, catalog: Catalog, chosen: dict[str, CatalogEntry], why_not: WhyNot, issues: list[ConfigIssue]
) -> tuple[list[str], dict[str, str]]:
    """The runtimes to serve, and why each other one is not served."""
    if rc.enabled is None:
        reasons = {name: why_not(entry) for name, entry in chosen.items()}
        return [n for n, r in reasons.items() if r is None], {n: r for n, r in reasons.items() if r is not None}
    enabled: list[str] = []
    for i, name in enumerate(rc.enabled):
        if name not in catalog.names():
            issues.append(_unknown(f"runtimes.enabled[{i}]", name, catalog))
        elif name in enabled:
            issues.append(ConfigIssue(f"runtimes.enabled[{i}]", "listed twice", name))
        elif name in chosen:
            if (reason := why_not(chosen[name])) is not None:
                issues.append(ConfigIssue(f"runtimes.enabled[{i}]", "cannot be served by this stack", name, reason))
            enabled.append(name)
    return enabled, {n: "not in runtimes.enabled" for n in chosen if n not in enabled}


def _team_runtimes(
    rc: RuntimesConfig,
    team_list: Sequence[TeamConfig],
    catalog: Catalog,
    chosen: dict[str, CatalogEntry],
    why_not: WhyNot,
    issues: list[ConfigIssue],
) -> list[Served]:
    teams = {t.name: t for t in team_list}
    served = []
    names: dict[tuple[str, str], int] = {}  # (team, object name) → first runtimes.teams index
    for i, tr in enumerate(rc.teams):
        path = f"runtimes.teams[{i}]"
        key = (tr.team, tr.name or tr.runtime)
        if key in names:
            field = "name" if tr.name else "runtime"
            message = f"team {tr.team} already gets a runtime named {key[1]} (runtimes.teams[{names[key]}])"
            issues.append(ConfigIssue(f"{path}.{field}", message, key[1], "give one of them another `name`"))
            continue
        names[key] = i
        team = teams.get(tr.team)
        if team is None:
            hint = did_you_mean(tr.team, teams) or "teams: " + (", ".join(teams) or "none defined")
            issues.append(ConfigIssue(f"{path}.team", "no such team in teams[]", tr.team, hint))
        if tr.runtime not in catalog.names():
            issues.append(_unknown(f"{path}.runtime", tr.runtime, catalog))
        elif tr.runtime not in chosen:
            continue  # its runtimes.versions pin is already reported
        elif (reason := why_not(chosen[tr.runtime])) is not None:
            issues.append(ConfigIssue(f"{path}.runtime", "cannot be served by this stack", tr.runtime, reason))
        elif team is not None:
            entry, name = chosen[tr.runtime], tr.name or tr.runtime
            served.append(Served(entry, name, "TrainingRuntime", team.resolved_namespace, tr.overrides, team.name))
    return served


def unused_settings(
    rc: RuntimesConfig, placement: Iterable[str], selection: Selection, catalog: Catalog
) -> tuple[list[ConfigIssue], list[str]]:
    """Settings keyed by runtime name that reach no served runtime: an unknown name is an error (with a
    did-you-mean), a catalog runtime this stack does not serve is a warning (the setting has no effect)."""
    served = {s.name for s in selection.served}
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    keyed = [("queues.placement.runtimes", name) for name in placement]
    keyed += [("runtimes.overrides", n) for n in rc.overrides] + [("runtimes.versions", n) for n in rc.versions]
    for where, name in keyed:
        if name in served:
            continue
        if name in catalog.names():
            why = selection.skipped.get(name, "not served by this stack")
            warnings.append(f"{where}.{name}: has no effect: {name} is not served ({why})")
        elif where == "queues.placement.runtimes":
            hint = did_you_mean(name, [*catalog.names(), *served]) or "served: " + ", ".join(sorted(served))
            issues.append(ConfigIssue(f"{where}.{name}", "no such runtime", name, hint))
    return issues, warnings


def select(
    rc: RuntimesConfig,
    teams: Sequence[TeamConfig],
    trainer: str,
    available: set[str],
    catalog: Catalog,
    mount_path: str | None = None,
) -> tuple[Selection, list[ConfigIssue]]:
    """What this stack serves (Trainer version `trainer`, platform features `available`, the claim mounted at
    `mount_path`), and every wrong reference in `runtimes:` with its path."""
    issues: list[ConfigIssue] = []

    def why_not(entry: CatalogEntry) -> str | None:
        return _why_not(entry, trainer, available, mount_path)

    chosen = _chosen_versions(rc, catalog, trainer, issues)
    issues += [_unknown(f"runtimes.versions.{n}", n, catalog) for n in rc.versions if n not in catalog.names()]
    issues += [_unknown(f"runtimes.overrides.{n}", n, catalog) for n in rc.overrides if n not in catalog.names()]
    enabled, skipped = _enabled(rc, catalog, chosen, why_not, issues)
    for i, name in enumerate(rc.retiring):
        if name not in enabled:
            hint = "a retiring runtime stays enabled for one more `pulumi up`; remove it from both lists afterwards"
            issues.append(ConfigIssue(f"runtimes.retiring[{i}]", "not an enabled runtime", name, hint))

    served = []
    for name in sorted(enabled):
        override = rc.overrides.get(name, RuntimeOverride())
        served.append(Served(chosen[name], name, override=override))
        if rc.versioned_names:
            pins = [e for e in catalog.versions_of(name) if e.supports(trainer)]
            served += [Served(e, f"{name}-v{e.version}", override=override, pinned=True) for e in pins]
    served += _team_runtimes(rc, teams, catalog, chosen, why_not, issues)
    return Selection(tuple(served), skipped), issues


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


def _pin_env(runtime: dict[str, Any], values: dict[str, str]) -> None:
    """Set `values` (in this order) in every container that names the cache image: the data cache's settings."""
    for _, pod in pod_specs(runtime):
        for _, c in containers(pod):
            env = c.get("env") or []
            if not any(e.get("name") == IMAGE_ENV for e in env):
                continue
            rest = [e for e in env if e.get("name") not in values]
            c["env"] = [*rest, *({"name": k, "value": v} for k, v in values.items())]


def build_runtime(ctx: ServeContext, catalog: Catalog, served: Served) -> dict[str, Any]:
    """The manifest of one served runtime: catalog entry → version-resolved → overrides → injections."""
    entry = served.entry
    runtime = entry.manifest(ctx.trainer)
    if "data-cache" in entry.requires:
        _pin_env(runtime, pinned_env(ctx.data_cache, cache_image(ctx.data_cache, ctx.trainer)))
    _apply_override(runtime, served.override)
    source = entry.runtime.metadata
    labels = dict(source.labels)
    labels.update({CATALOG_VERSION: catalog.version, m.RUNTIME_VERSION: entry.version, RUNTIME: entry.name})
    if entry.name in ctx.runtimes.retiring:
        labels[m.SUPPORT_LABEL] = m.DEPRECATED
    if served.team:
        labels[TEAM] = served.team
    annotations = {k: v for k, v in source.annotations.items() if k != m.TRAINER_VERSIONS}
    annotations[TRAINER_API] = ctx.trainer
    runtime["kind"] = served.kind
    runtime["metadata"] = meta.metadata(served.name, served.namespace, labels, annotations)
    ft = ctx.runtimes.fault_tolerance.merged(served.override.fault_tolerance)
    return apply_injections(replace(ctx.facts, fault_tolerance=ft), runtime)


def sdk_trainer_limits(runtime: dict[str, Any]) -> dict[str, Any]:
    """The limits of the container the kubeflow SDK takes for the trainer (get_runtime_trainer_container): the
    first `node` container of a replicated job that carries the ancestor label."""
    for job in replicated_jobs(runtime):
        if ancestor(job) is None:
            continue
        for _, c in containers(pod_spec(job), ("containers",)):
            if c.get("name") == "node":
                return dict((c.get("resources") or {}).get("limits") or {})
    return {}


def sdk_listing_warnings(ctx: ServeContext, catalog: Catalog, selection: Selection) -> list[str]:
    """Served runtimes whose trainer the kubeflow SDK cannot tell the device of (an accelerator it does not
    know, e.g. `amd.com/gpu` after the `accelerator` injection): its list_runtimes() raises for the namespace."""
    unknown = {}
    for served in selection.served:
        limits = sdk_trainer_limits(build_runtime(ctx, catalog, served))
        if not sdk_knows_device(limits):
            where = f"{served.namespace}/" if served.namespace else ""
            unknown[f"{where}{served.name}"] = ", ".join(sorted(limits))
    if not unknown:
        return []
    listed = "; ".join(f"{name} ({limits})" for name, limits in sorted(unknown.items()))
    return [
        f'runtimes: the kubeflow SDK knows only {SDK_DEVICES} limits on a trainer and raises "Unknown device '
        f'type" on {listed}: TrainerClient().list_runtimes() fails wherever these are served (kubectl and '
        "TrainJobs still work); add a cpu limit to their trainer (runtimes.overrides.<name>.resources) or leave "
        "them out of runtimes.enabled (docs/data-scientists.md)"
    ]


def catalog_plan(ctx: ServeContext, catalog: Catalog, selection: Selection) -> PlanPart:
    objects = []
    issues = []
    for served in selection.served:
        # Running TrainJobs reference runtimes by name: never delete one by accident. Retained in the
        # cluster when dropped from the program, and protected unless it is retiring (or data loss is allowed).
        # Under allowDataLoss a destroy deletes them too, while the Trainer controller that must clear their
        # `resource-in-use` finalizer still runs; retained, they would outlive it and block the CRD's delete.
        unprotected = ctx.allow_data_loss or served.entry.name in ctx.runtimes.retiring
        manifest = build_runtime(ctx, catalog, served)
        storage = ctx.facts.storage
        why = workspace_disagreement(manifest) if storage is not None else None
        if why and storage is not None:
            where = f"{served.namespace}/" if served.namespace else ""
            issues.append(
                ConfigIssue(
                    f"runtimes.{served.entry.name}",
                    f"runtime {where}{served.name}: {why}",
                    None,
                    f"mount the {VOLUME!r} volume only where the platform does ({storage.mount_path}), "
                    "and leave TRAIN_JOB_NAME to the platform",
                )
            )
        objects.append(ManagedObject(manifest, protect=not unprotected, retain_on_delete=not ctx.allow_data_loss))
    if issues:
        raise ConfigError(issues)
    return PlanPart(objects=tuple(objects))
