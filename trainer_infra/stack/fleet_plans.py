"""A fleet stack → one validated config and one Plan per cluster (MultiKueue manager + workers).

Every cluster's config is derived from the one stack config: teams, runtimes, priorities, storage and
controller settings are the stack's own, so namespaces, LocalQueues, team RBAC, ClusterTrainingRuntimes
and WorkloadPriorityClasses come out of the same planners for every cluster and cannot drift; a worker
adds only its connection and node pools (a team's quota on a worker covers the pools that worker has).
Each derived config goes through the single-cluster validation; its issues are reported with the path
the user edits. Then the manager's plan gets the MultiKueue objects and summed quota, each worker's plan
the identity the manager uses there. Nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from pydantic import SecretStr

from trainer_infra.components.kueue import kueue_frameworks, kueue_settings, with_multikueue
from trainer_infra.components.settings import deep_merge
from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.objects import FleetPlan, ManagedObject, Plan
from trainer_infra.core.quantity import quantity
from trainer_infra.core.upstream.kueue import GROUP as KUEUE_GROUP
from trainer_infra.fleet import checks
from trainer_infra.fleet.config import FleetConfig, WorkerConfig
from trainer_infra.fleet.multikueue import (
    CONFIG_NAME,
    hold,
    manager_flavor_name,
    manager_flavors,
    manager_objects,
    token_secret_name,
    with_admission_check,
    worker_auth_objects,
)
from trainer_infra.manifests.meta import LEAVING
from trainer_infra.queues.derive import cluster_queue_name, resource_groups
from trainer_infra.queues.resolve import QueueLimits, covered_resources
from trainer_infra.stack.build import build_plan, unique_sorted
from trainer_infra.stack.config import KubernetesConfig, StackConfig
from trainer_infra.stack.secrets import stored_encrypted
from trainer_infra.stack.validate import Validated, shape, validate_model

RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
TRAINER_CRDS_ONLY = {"manager": {"replicas": 0}, "webhook": {"failurePolicy": "Ignore"}}


@dataclass(frozen=True)
class ValidatedFleet:
    config: StackConfig
    fleet: FleetConfig
    manager: Validated
    workers: tuple[tuple[WorkerConfig, Validated], ...]

    @property
    def warnings(self) -> list[str]:
        seen: dict[str, None] = {}
        for v in (self.manager, *(v for _, v in self.workers)):
            seen.update(dict.fromkeys(v.warnings))
        return list(seen)


def is_fleet(raw: Mapping[str, Any]) -> bool:
    return raw.get("fleet") is not None


def _manager_config(cfg: StackConfig) -> StackConfig:
    teams = [t.model_copy(update={"quota": {}}) for t in cfg.teams]
    return cfg.model_copy(update={"fleet": None, "node_pools": [], "teams": teams})


def _worker_config(cfg: StackConfig, w: WorkerConfig) -> StackConfig:
    pools = {p.name for p in w.node_pools}
    teams = [t.model_copy(update={"quota": {k: q for k, q in t.quota.items() if k in pools}}) for t in cfg.teams]
    kubernetes = KubernetesConfig(
        version=w.version or cfg.kubernetes.version, context=w.context, kubeconfig=w.kubeconfig
    )
    return cfg.model_copy(update={"fleet": None, "node_pools": w.node_pools, "kubernetes": kubernetes, "teams": teams})


def _worker_path(i: int, issue: ConfigIssue, name: str) -> ConfigIssue:
    path = issue.path
    if path.startswith("nodePools"):
        path = f"fleet.workers[{i}].{path}"
    elif path.startswith("kubernetes."):
        path = f"fleet.workers[{i}].{path.removeprefix('kubernetes.')}"
    return replace(issue, path=path, message=f"{issue.message} (on worker {name})")


def validate_fleet(
    raw: Mapping[str, Any], source: str = "", secret_keys: frozenset[str] | None = None
) -> ValidatedFleet:
    """`secret_keys`: the top-level config keys Pulumi holds as secrets (live); None offline, where a
    secret reads as a placeholder."""
    cfg = shape(raw, source, [])
    fleet = cfg.fleet
    assert fleet is not None, "validate_fleet needs a stack with `fleet`"

    def is_secret(value: SecretStr) -> bool:
        return stored_encrypted(("fleet",), value, secret_keys)

    issues = checks.check_workers(fleet, cfg.kubernetes.kubeconfig, is_secret)
    issues += checks.check_manager_pools(cfg.node_pools)
    issues += checks.check_served(fleet, cfg.teams)
    issues += checks.check_manager_flavors(fleet)
    issues += checks.check_multikueue_settings(fleet, kueue_settings(cfg).install)
    if cfg.team_shards:
        hint = "a fleet is one program over every cluster; remove teamShards (docs/large-organisations.md)"
        issues.append(
            ConfigIssue("teamShards", "team shards are not supported with a fleet", str(cfg.team_shards), hint)
        )
    if issues:
        raise ConfigError(issues, source)
    manager: Validated | None = None
    try:
        manager = validate_model(_manager_config(cfg), source, secret_keys=secret_keys)
    except ConfigError as exc:
        issues += [replace(i, message=f"{i.message} (on the manager)") for i in exc.issues]
    workers: list[tuple[WorkerConfig, Validated]] = []
    # a worker's `kubernetes.kubeconfig` is its `fleet.workers[].kubeconfig`, which check_workers held secret
    worker_keys = None if secret_keys is None else secret_keys | {"kubernetes"}
    for i, w in enumerate(fleet.workers):
        try:
            workers.append((w, validate_model(_worker_config(cfg, w), source, secret_keys=worker_keys)))
        except ConfigError as exc:
            issues += [_worker_path(i, issue, w.name) for issue in exc.issues]
    if manager is not None:
        trainer = manager.releases.by_name["trainer"].app_version
        issues += checks.check_manager_trainer(fleet, trainer, "fleet.managerTrainerController")
    if issues or manager is None:
        raise ConfigError(issues, source)
    return ValidatedFleet(cfg, fleet, manager, tuple(workers))


def _runtimes(plan: Plan) -> dict[str, ManagedObject]:
    return {o.key: o for o in plan.objects if o.manifest["kind"] in RUNTIME_KINDS}


def check_runtimes_identical(vf: ValidatedFleet, plans: Mapping[str, Plan]) -> list[ConfigIssue]:
    """A job may land on any worker: each must serve the same runtimes, byte for byte."""
    (first, _), *rest = vf.workers
    reference = _runtimes(plans[first.name])
    issues = []
    for i, (w, _) in enumerate(vf.workers[1:], start=1):
        mine = _runtimes(plans[w.name])
        for key in sorted(set(reference) | set(mine)):
            if reference.get(key) != mine.get(key):
                obj = reference.get(key) or mine[key]
                issues.append(
                    ConfigIssue(
                        f"fleet.workers[{i}].nodePools",
                        f"{obj.manifest['kind']} {obj.manifest['metadata']['name']} would differ from the one on "
                        f"worker {first.name} (a job dispatched here would run differently)",
                        None,
                        "give every worker's pools the same taints, accelerator resource and topology levels",
                    )
                )
    del rest
    return issues


def _per_worker(
    vf: ValidatedFleet,
) -> tuple[list[tuple[str, str]], list[str], dict[str, list[tuple[str, QueueLimits]]]]:
    """(worker, pool) flavors (workers preferred first), covered resources, and per team name: its limits on
    each worker pool as the worker itself resolved them, capped by `fleet.managerQuota.cap`. Kueue assigns a
    pod set one flavor, so on the manager a job must fit one worker's share, as it must to run; the manager's
    total is still the sum over the workers. A draining worker's flavors stay (admitted workloads name them)
    with no quota, so nothing new is counted against it."""
    flavors = [(w.name, p.name) for w, v in vf.workers for p in v.queues.pools]
    covered = covered_resources(res for _, v in vf.workers for res in v.queues.covered)
    cap = {res: quantity(value) for res, value in vf.fleet.manager_quota.cap.items()}

    def capped(res: str, amount: Decimal) -> Decimal:
        return min(amount, cap[res]) if res in cap else amount

    quotas: dict[str, list[tuple[str, QueueLimits]]] = {}
    for team in vf.config.teams:
        per_flavor = quotas.setdefault(team.name, [])
        for w, v in vf.workers:
            for pool in v.queues.pools:
                limits = v.queues.limits(team.name, pool.name)
                if w.draining:
                    limits = limits.map(lambda _res, _amount: Decimal(0))
                per_flavor.append((manager_flavor_name(w.name, pool.name), limits.map(capped)))
    return flavors, covered, quotas


def _manager_plan(vf: ValidatedFleet, plan: Plan) -> Plan:
    v = vf.manager
    kueue = v.releases.by_name["kueue"]
    api = kueue.api_versions[KUEUE_GROUP]
    flavors, covered, quotas = _per_worker(vf)
    teams = {cluster_queue_name(team): team.name for team in vf.config.teams}
    objects: list[ManagedObject] = []
    for obj in plan.objects:
        m = obj.manifest
        if m["kind"] == "ClusterQueue" and m["metadata"]["name"] in teams:
            groups = resource_groups(covered, quotas[teams[m["metadata"]["name"]]])
            # after the MultiKueueConfig: when the drain-first policy refuses its update, the `up` stops before
            # the queues lose the dropped worker's flavors
            after = (*obj.after, f"multikueueconfig-{CONFIG_NAME}")
            obj = replace(obj, manifest=with_admission_check(m, groups), after=after)
        objects.append(obj)
    workers = []
    for w, wv in vf.workers:
        ns = wv.releases.by_name["kueue"].namespace
        workers.append((w.name, w.api_server, f"secret-{ns}-{token_secret_name(w.token_generation)}", w.draining))
    objects += manager_flavors(api, flavors) + manager_objects(api, kueue.namespace, workers)
    mk = vf.fleet.multi_kueue
    block = {"gcInterval": mk.gc_interval, "origin": mk.origin, "workerLostTimeout": mk.worker_lost_timeout}
    releases = []
    for r in plan.releases:
        if r.name == "kueue":
            r = replace(r, values=with_multikueue(r.values, block))
        elif r.name == "trainer" and not vf.fleet.manager_trainer_controller:
            # CRDs only: no controller (it would run managed jobs here); webhooks fail open without it.
            r = replace(r, values=deep_merge(r.values, TRAINER_CRDS_ONLY))
        releases.append(r)
    gates = tuple(
        replace(g, probes=()) if g.component == "trainer" and not vf.fleet.manager_trainer_controller else g
        for g in plan.gates
    )
    return replace(plan, releases=tuple(releases), gates=gates, objects=unique_sorted(objects))


def _draining(plan: Plan) -> Plan:
    """A draining worker keeps everything in its cluster when it leaves `fleet.workers`: each object is retained on
    delete and none is protected (Pulumi refuses to forget a protected one, and goes on deleting the rest: the team
    namespaces would stay without their NetworkPolicies, RBAC and quotas). What was protected is marked as leaving.
    Its queues admit nothing new. The manager's identity there (added after this) is deleted for real on removal,
    so the manager's access ends."""

    def keep(obj: ManagedObject) -> ManagedObject:
        m = obj.manifest
        if m["kind"] == "ClusterQueue":
            m = hold(m)
        if obj.protect:
            meta = m["metadata"]
            m = {
                **m,
                "metadata": {
                    **meta,
                    "annotations": dict(sorted({**meta.get("annotations", {}), LEAVING: "true"}.items())),
                },
            }
        return replace(obj, manifest=m, protect=False, retain_on_delete=True)

    resources = tuple(
        replace(r, options=replace(r.options, protect=False, retain_on_delete=True)) for r in plan.resources
    )
    return replace(plan, objects=tuple(keep(o) for o in plan.objects), resources=resources, leaving=True)


def build_fleet(vf: ValidatedFleet) -> FleetPlan:
    frameworks = kueue_frameworks(kueue_settings(vf.config))
    plans = {w.name: build_plan(v) for w, v in vf.workers}
    issues = check_runtimes_identical(vf, plans)  # before a draining worker's marks
    if issues:
        raise ConfigError(issues, "the fleet")
    for w, v in vf.workers:
        plan = _draining(plans[w.name]) if w.draining else plans[w.name]
        ns = v.releases.by_name["kueue"].namespace
        team_ns = [t.resolved_namespace for t in v.config.teams]
        auth = worker_auth_objects(ns, team_ns, frameworks, w.token_generation)
        plans[w.name] = replace(plan, objects=unique_sorted([*plan.objects, *auth]))
    plans[vf.fleet.manager_name] = _manager_plan(vf, build_plan(vf.manager))
    return FleetPlan(vf.fleet.manager_name, plans)
