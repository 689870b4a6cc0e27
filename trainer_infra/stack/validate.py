"""One validation pass over a stack config: shape, every area's checks, the compatibility matrix and the
catalog selection, all reported together with their config paths. What it works out on the way (releases,
resolved pools and queues, the served runtimes) is kept in `Validated`, so nothing downstream works it out
again: the planners and the CLI read it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainer_infra.catalog.injections import RuntimeFacts
from trainer_infra.catalog.loader import Catalog, load_catalog
from trainer_infra.catalog.plan import Selection, ServeContext, features, select
from trainer_infra.components.kueue import kueue_settings
from trainer_infra.components.plan import Releases, resolve_releases
from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.schema import issue_from
from trainer_infra.nodepools.checks import check_pools
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.plan import node_pool_objects
from trainer_infra.nodepools.resolve import resolve_pools
from trainer_infra.queues.checks import check_queues
from trainer_infra.queues.placement import Placement
from trainer_infra.queues.resolve import ResolvedQueues, resolve_queues
from trainer_infra.stack.config import StackConfig
from trainer_infra.storage.checks import check_storage
from trainer_infra.tenancy.checks import check_teams


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


def _platform_namespaces(cfg: StackConfig, releases: Releases, pools: tuple[ResolvedPool, ...]) -> dict[str, str]:
    """Namespaces the platform itself uses, and whose: no team may live in one."""
    owners = {ns: f"the {name} controller's namespace" for name, ns in releases.namespaces().items()}
    own = node_pool_objects(pools, cfg.images.registry_mirror)
    if cfg.storage is not None:
        own += cfg.storage.backend.objects(cfg.storage.settings, cfg.images.registry_mirror)
    for obj in own:
        if obj.manifest["kind"] == "Namespace":
            name = obj.manifest["metadata"]["name"]
            owners.setdefault(name, f"a namespace of the platform ({name}, created for {_creator(obj.manifest)})")
    return owners


def _creator(manifest: dict[str, Any]) -> str:
    labels = manifest["metadata"].get("labels") or {}
    return str(labels.get("app.kubernetes.io/name") or "the node-pool or storage backend")


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


def _draft(cfg: StackConfig) -> Draft:
    kueue = kueue_settings(cfg)
    releases = resolve_releases(cfg, cfg.kubernetes.version, kueue.train_job_integration)
    pools = resolve_pools(cfg.node_pools)
    pool_issues = check_pools(pools)
    queues = resolve_queues(() if pool_issues else pools, cfg.teams, kueue.tas.enabled)
    catalog = load_catalog()
    trainer = releases.by_name["trainer"].version
    selection, catalog_issues = select(cfg.runtimes, cfg.teams, trainer, features(cfg.data_cache), catalog)
    return Draft(cfg, releases, pools, pool_issues, queues, catalog, selection, catalog_issues)


def _pools(d: Draft) -> list[ConfigIssue]:
    return d.pool_issues


def _teams(d: Draft) -> list[ConfigIssue]:
    return check_teams(d.config.teams, {} if d.pool_issues else _platform_namespaces(d.config, d.releases, d.pools))


def _storage(d: Draft) -> list[ConfigIssue]:
    return check_storage(d.config.storage, d.config.teams)


def _queues(d: Draft) -> list[ConfigIssue]:
    return [] if d.pool_issues else check_queues(d.config.teams, d.config.queues, d.queues)


def _runtimes(d: Draft) -> list[ConfigIssue]:
    return d.catalog_issues


# Every area's checks, in report order; a new check is a function in its area plus one line here.
CHECKS: list[Callable[[Draft], list[ConfigIssue]]] = [_pools, _teams, _storage, _queues, _runtimes]


def validate(raw: Mapping[str, Any], source: str = "", earlier: list[ConfigIssue] | None = None) -> Validated:
    """The single entry point. `earlier` issues (e.g. misspelt namespaces in the stack file) are reported
    together with these."""
    earlier = list(earlier or [])
    return validate_model(shape(raw, source, earlier), source, earlier)


def validate_model(cfg: StackConfig, source: str = "", earlier: list[ConfigIssue] | None = None) -> Validated:
    """Every check after the shape: the fleet validates each cluster's derived config through here."""
    earlier = list(earlier or [])
    if cfg.fleet is not None:
        hint = "`trainer-infra validate`/`render` and the Pulumi program handle fleets (stack/fleet.py)"
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
        placement=Placement.resolve(
            cfg.queues.placement, bool(d.pools), d.queues.tolerations, sorted(d.queues.topologies)
        ),
        storage=cfg.storage,
        hf_token=any(t.secrets.hf_token is not None for t in cfg.teams),
        default_resources=cfg.runtimes.default_resources,
    )
    serve = ServeContext(
        d.releases.by_name["trainer"].version, cfg.runtimes, cfg.data_cache, facts, cfg.allow_data_loss
    )
    warnings = [f"UNSUPPORTED (allowUnsupportedVersions): {i.render()}" for i in compat]
    return Validated(cfg, d.releases, d.pools, d.queues, d.catalog, d.selection, serve, warnings)
