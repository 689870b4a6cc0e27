"""One validation pass over a stack config: shape, every area's checks, the compatibility matrix and the
catalog selection, all reported together with their config paths. What it works out on the way (releases,
resolved pools and queues, the served runtimes) is kept in `Validated`, so nothing downstream works it out
again: the planners and the CLI read it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainer_infra.catalog.entry import Catalog
from trainer_infra.catalog.injections import RuntimeFacts
from trainer_infra.catalog.loader import load_catalog
from trainer_infra.catalog.plan import (
    Selection,
    ServeContext,
    features,
    sdk_listing_warnings,
    select,
    unused_settings,
)
from trainer_infra.catalog.security_context import PLATFORM_MOUNTS, restricted_pods, restricted_refusal
from trainer_infra.components.checks import check_components
from trainer_infra.components.kueue import kueue_settings
from trainer_infra.components.plan import Releases, resolve_releases
from trainer_infra.components.registry import COMPONENTS
from trainer_infra.core.errors import ConfigError, ConfigIssue, format_path
from trainer_infra.core.model import Resources
from trainer_infra.core.schema import issue_from
from trainer_infra.core.walk import instances
from trainer_infra.datacache.checks import check_data_cache, check_data_cache_protections, check_job_service_accounts
from trainer_infra.datacache.pinned import CACHE_CLUSTER_PODS
from trainer_infra.nodepools.checks import (
    check_pools,
    check_scaling_under_tas,
    disk_issues,
    disk_warnings,
    kubelet_warnings,
)
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS as POOL_BACKENDS
from trainer_infra.nodepools.resolve import resolve_pools
from trainer_infra.observability.checks import check_observability
from trainer_infra.queues.checks import check_queues, limits_without_effect
from trainer_infra.queues.placement import Placement
from trainer_infra.queues.resolve import ResolvedQueues, resolve_queues
from trainer_infra.stack.config import StackConfig
from trainer_infra.stack.load import NAMESPACE
from trainer_infra.stack.secrets import plaintext_warnings
from trainer_infra.storage.checks import (
    check_mount_path,
    check_storage,
)
from trainer_infra.tenancy.checks import SYSTEM_NAMESPACES, check_notebooks, check_restricted, check_teams
from trainer_infra.tenancy.images import image_warnings


@dataclass(frozen=True)
class Validated:
    """A valid stack config and the facts resolved from it, once."""

    config: StackConfig
    releases: Releases
    pools: tuple[ResolvedPool, ...]
    queues: ResolvedQueues
    catalog: Catalog
    selection: Selection
    serve: ServeContext
    warnings: list[str] = field(default_factory=list)


def shape(raw: Mapping[str, Any], source: str, earlier: list[ConfigIssue]) -> StackConfig:
    try:
        return StackConfig.model_validate(dict(raw))
    except ValidationError as exc:
        raise ConfigError(earlier + [issue_from(StackConfig, e) for e in exc.errors()], source) from None


@dataclass(frozen=True)
class Draft:
    """A config of valid shape and what is resolved from it, before the checks have passed."""

    config: StackConfig
    releases: Releases
    pools: tuple[ResolvedPool, ...]
    pool_issues: list[ConfigIssue]  # queues are resolved and checked only over well-formed pools
    queues: ResolvedQueues
    catalog: Catalog
    selection: Selection
    catalog_issues: list[ConfigIssue]
    warnings: list[str]  # settings that have no effect in this stack


def _draft(cfg: StackConfig) -> Draft:
    kueue = kueue_settings(cfg)
    releases = resolve_releases(cfg, cfg.kubernetes.version, kueue.train_job_integration)
    storage = cfg.tenancy.ephemeral_storage
    pools = resolve_pools(cfg.node_pools, storage.max)
    bound = storage.max if storage.enabled else None
    pool_issues = check_pools(pools, cfg.cloud) + check_scaling_under_tas(pools, kueue.tas.enabled)
    pool_issues += disk_issues(pools, bound)
    queues = resolve_queues(() if pool_issues else pools, cfg.teams, kueue.tas.enabled)
    catalog = load_catalog()
    trainer = releases.by_name["trainer"].app_version
    mount_path = cfg.storage.mount_path if cfg.storage is not None else None
    selection, catalog_issues = select(cfg.runtimes, cfg.teams, trainer, features(cfg.data_cache), catalog, mount_path)
    unused, warnings = unused_settings(cfg.runtimes, cfg.queues.placement.runtimes, selection, catalog)
    warnings += no_effect_warnings(cfg) + kubelet_warnings(pools)
    warnings += disk_warnings(pools, bound)
    return Draft(cfg, releases, pools, pool_issues, queues, catalog, selection, catalog_issues + unused, warnings)


def no_effect_warnings(cfg: StackConfig) -> list[str]:
    """Values that are valid but change nothing in this stack, named so nobody relies on them."""
    out = []
    if not cfg.data_cache.enabled and "cache_image" in cfg.data_cache.model_fields_set:
        out.append("dataCache.cacheImage: has no effect while dataCache.enabled is false")
    for i, team in enumerate(cfg.teams):
        m = team.members
        if m.manage_runtimes and not (m.users or m.groups or m.service_accounts):
            out.append(f"teams[{i}].members.manageRuntimes: has no effect: the team has no members to grant it to")
    out += [issue.render() for issue in limits_without_effect(cfg.teams, cfg.queues)]
    out += image_warnings(cfg.tenancy.images, cfg.images.registry_mirror, len(cfg.teams))
    return out


def _namespace_claims(d: Draft) -> list[tuple[str, str, str]]:
    """(namespace, config path that chose it, what it is) for every namespace the platform creates itself,
    in config order: controllers, node-pool backends, storage backends, observability."""
    cfg = d.config
    claims = []
    for component in COMPONENTS:
        release, settings = d.releases.by_name.get(component.name), component.settings(cfg)
        if release is None or settings is None or not component.owns_namespace:
            continue
        path = f"components.{component.name}" + (".namespace" if settings.namespace else "")
        claims.append((release.namespace, path, f"the {component.name} controller's namespace"))
    for backend in POOL_BACKENDS:
        pools = [p for p in d.pools if p.config.backend == backend.name and p.settings is not None]
        for obj in backend.shared_objects(pools, None) if pools else []:
            if obj.manifest["kind"] == "Namespace":
                what = f"the {backend.name} backend's namespace"
                claims.append((obj.manifest["metadata"]["name"], pools[0].at, what))
    if cfg.storage is not None:
        at, settings = f"storage.{cfg.storage.backend.name}", cfg.storage.settings
        for obj in cfg.storage.backend.objects(settings, None):
            if obj.manifest["kind"] == "Namespace":
                name = obj.manifest["metadata"]["name"]
                where = next((loc for loc, v in instances(settings, str) if v == name), ())
                what = f"the {cfg.storage.backend.name} storage backend's namespace"
                claims.append((name, format_path((at, *where)), what))
    if cfg.observability.enabled:
        claims.append((cfg.observability.namespace, "observability.namespace", "the observability namespace"))
    return claims


def _namespaces(d: Draft) -> list[ConfigIssue]:
    """A namespace the platform creates has one owner (removing the owner deletes it, and everything in it),
    and is never a Kubernetes system namespace."""
    issues = []
    owners: dict[str, str] = {}
    for namespace, path, what in _namespace_claims(d):
        if namespace in SYSTEM_NAMESPACES:
            hint = "pick a namespace of its own: the platform creates (and would delete) it"
            message = f"{what} would be {namespace}, a Kubernetes system namespace"
            issues.append(ConfigIssue(path, message, namespace, hint))
        elif namespace in owners:
            hint = "every part of the platform needs its own namespace"
            issues.append(
                ConfigIssue(path, f"{what} would be {namespace}, already {owners[namespace]}", namespace, hint)
            )
        owners.setdefault(namespace, f"{what} ({path})")
    return issues


def _components(d: Draft) -> list[ConfigIssue]:
    return check_components(d.config, d.releases)


def _pools(d: Draft) -> list[ConfigIssue]:
    return d.pool_issues


def _teams(d: Draft) -> list[ConfigIssue]:
    platform = {ns: f"{what} ({path})" for ns, path, what in _namespace_claims(d)}
    return check_teams(d.config.teams, platform) + check_notebooks(d.config.teams, d.config.tenancy.network_policies)


def _storage(d: Draft) -> list[ConfigIssue]:
    return (
        check_storage(d.config.storage, d.config.teams)
        + check_mount_path(d.config.storage, PLATFORM_MOUNTS)
        + check_data_cache(d.config.data_cache)
        + check_job_service_accounts(d.config.teams)
        + check_data_cache_protections(d.config.data_cache, d.config.teams, d.config.tenancy.priority_classes)
    )


def _queues(d: Draft) -> list[ConfigIssue]:
    return [] if d.pool_issues else check_queues(d.config.teams, d.config.queues, d.queues)


def _runtimes(d: Draft) -> list[ConfigIssue]:
    return d.catalog_issues


def _restricted(d: Draft) -> list[ConfigIssue]:
    """Judged on each runtime as served (the `pod-security` injection applied; the other injections add
    nothing Pod Security looks at) plus the pods the data cache runtime creates at run time."""
    trainer = d.releases.by_name["trainer"].app_version
    security = d.config.runtimes.security_context
    served = [
        (
            s.team,
            s.name,
            restricted_refusal(
                restricted_pods(security, s.entry.manifest(trainer)),
                CACHE_CLUSTER_PODS if "data-cache" in s.entry.requires else (),
            ),
        )
        for s in d.selection.served
    ]
    return check_restricted(d.config.teams, served)


def _observability(d: Draft) -> list[ConfigIssue]:
    return check_observability(d.config.observability, [t.name for t in d.config.teams])


def _container_resources(d: Draft) -> list[ConfigIssue]:
    """Every `resources` block in the config (controllers, runtime defaults and overrides), as the API
    server checks a pod's: requests ≤ limits, extended resources whole and requested = limit."""
    return [
        ConfigIssue(format_path((*loc, key)), problem)
        for loc, resources in instances(d.config, Resources)
        for key, problem in resources.problems()
    ]


# Every area's checks, in report order; a new check is a function in its area plus one line here.
CHECKS: list[Callable[[Draft], list[ConfigIssue]]] = [
    _components,
    _namespaces,
    _pools,
    _teams,
    _storage,
    _queues,
    _runtimes,
    _container_resources,
    _restricted,
    _observability,
]


def validate(
    raw: Mapping[str, Any],
    source: str = "",
    earlier: list[ConfigIssue] | None = None,
    secret_keys: frozenset[str] | None = None,
) -> Validated:
    """The single entry point. `earlier` issues (e.g. misspelt namespaces in the stack file) are reported
    together with these; `secret_keys` as in `stack.secrets.stored_encrypted` (None offline)."""
    earlier = list(earlier or [])
    return validate_model(shape(raw, source, earlier), source, earlier, secret_keys)


def validate_model(
    cfg: StackConfig,
    source: str = "",
    earlier: list[ConfigIssue] | None = None,
    secret_keys: frozenset[str] | None = None,
) -> Validated:
    """Every check after the shape: the fleet validates each cluster's derived config through here."""
    earlier = list(earlier or [])
    if cfg.fleet is not None:
        hint = "`trainer-infra validate`/`render` and the Pulumi program handle fleets (stack/fleet_plans.py)"
        raise ConfigError(
            [*earlier, ConfigIssue("fleet", "a fleet stack is validated per cluster", None, hint)], source
        )
    d = _draft(cfg)
    issues = earlier + [issue for check in CHECKS for issue in check(d)]
    if issues:
        raise ConfigError(issues, source)
    compat = [ConfigIssue(f.path, f.message, None, f.hint) for f in d.releases.findings]
    if compat and not cfg.allow_unsupported_versions:
        extra = "or set allowUnsupportedVersions: true to install anyway"
        raise ConfigError([ConfigIssue(i.path, i.message, i.found, f"{i.hint}; {extra}") for i in compat], source)
    facts = RuntimeFacts(
        mirror=cfg.images.registry_mirror,
        placement=Placement.resolve(cfg.queues.placement, d.queues),
        storage=cfg.storage,
        hf_token=any(t.secrets.hf_token is not None for t in cfg.teams),
        hub_endpoint=cfg.tenancy.hub.endpoint,
        default_resources=cfg.runtimes.default_resources,
        accelerators=tuple(sorted({r for p in d.pools if (r := p.accelerator_resource)})),
        security_context=cfg.runtimes.security_context,
    )
    serve = ServeContext(
        d.releases.by_name["trainer"].app_version, cfg.runtimes, cfg.data_cache, facts, cfg.allow_data_loss
    )
    warnings = [f"UNSUPPORTED (allowUnsupportedVersions): {i.render()}" for i in compat]
    warnings += plaintext_warnings(cfg, NAMESPACE, secret_keys) + d.warnings
    warnings += sdk_listing_warnings(serve, d.catalog, d.selection)
    return Validated(cfg, d.releases, d.pools, d.queues, d.catalog, d.selection, serve, warnings)
