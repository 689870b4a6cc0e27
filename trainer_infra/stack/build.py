"""Validated stack → Plan: the one place where every area's planner is called, in a fixed order.

Each planner reads the validated config and the facts resolved during validation; a new area is one
function plus one line in PLANNERS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from trainer_infra.admission.model import AdmissionSettings, TeamAdmission
from trainer_infra.catalog.plan import catalog_plan
from trainer_infra.components.identity import controller_username
from trainer_infra.components.kueue import kueue_settings
from trainer_infra.components.plan import components_plan
from trainer_infra.components.registry import COMPONENTS
from trainer_infra.components.trainer import COMPONENT as TRAINER
from trainer_infra.components.trainer import StatusServer, progress_on, trainer_settings
from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.objects import ClusterAccess, ManagedObject, Plan, PlanPart, SecretValue
from trainer_infra.core.upstream import kueue
from trainer_infra.datacache.deputies import cache_deputy
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.datacache.rbac import data_cache_objects
from trainer_infra.manifests.runtime import images_of
from trainer_infra.nodepools.labels import POOL_LABEL
from trainer_infra.nodepools.plan import node_pool_plan
from trainer_infra.observability.facts import ObservedTeam, PlatformFacts
from trainer_infra.observability.plan import observability_plan
from trainer_infra.queues.derive import cluster_queue_name
from trainer_infra.queues.plan import queues_plan
from trainer_infra.stack.validate import Validated
from trainer_infra.storage import files
from trainer_infra.storage.files import DEFAULT_ID
from trainer_infra.storage.plan import storage_plan
from trainer_infra.tenancy.images import image_admission
from trainer_infra.tenancy.network import ApiServer, ControllerPort, NetworkSettings, ProxiedPort
from trainer_infra.tenancy.notebook import notebook_image
from trainer_infra.tenancy.plan import tenancy_plan

KIND_ORDER = ("Namespace", "CustomResourceDefinition", "StorageClass", "ClusterRole", "ClusterRoleBinding")


def plan_components(v: Validated) -> PlanPart:
    return components_plan(v.config, v.releases)


def _controller(v: Validated, name: str) -> str:
    component = next(c for c in COMPONENTS if c.name == name)
    release = v.releases.by_name[name]
    return controller_username(release, component.values(v.config, release))


def _status_server(v: Validated) -> StatusServer | None:
    """Trainer's status server when progress is on (None: off)."""
    release = v.releases.by_name["trainer"]
    return TRAINER.status_server(release) if progress_on(trainer_settings(v.config), release) else None


def _status_port(v: Validated) -> ControllerPort | None:
    server = _status_server(v)
    return None if server is None else ControllerPort(server.namespace, server.pod_labels, server.port)


def plan_tenancy(v: Validated) -> PlanPart:
    cfg = v.config
    trainer_ns = v.releases.by_name["trainer"].namespace
    claims = (cfg.storage.claim_name,) if cfg.storage is not None else ()
    served = catalog_plan(v.serve, v.catalog, v.selection).objects
    runtimes = [o.manifest for o in served if o.manifest["kind"].endswith("TrainingRuntime")]
    cache = cache_deputy(cfg.data_cache, runtimes)
    mirror = cfg.images.registry_mirror
    notebooks = tuple(notebook_image(t.notebook, mirror) for t in cfg.teams if t.notebook is not None)
    platform_images = tuple(image for rt in runtimes for image in images_of(rt)) + notebooks
    if files_on(v):
        platform_images += (files.image(mirror),)
    kueue_manages = kueue_settings(cfg).train_job_integration
    admission = AdmissionSettings(
        teams=tuple(
            TeamAdmission(t.resolved_namespace, claims, (t.local_queue,), tuple(t.job_service_accounts))
            for t in cfg.teams
        ),
        trainer_identity=_controller(v, "trainer"),
        kueue_identity=_controller(v, "kueue") if kueue_manages else None,
        kueue_write_back=kueue_manages and v.releases.by_name["kueue"].train_job_full_update,
        priority_classes=tuple(cfg.tenancy.priority_classes),
        data_cache_service_account=CACHE_INITIALIZER if cfg.data_cache.enabled else None,
        data_cache=cache,
        accelerators=v.serve.facts.accelerators,
        images=image_admission(cfg.tenancy.images, mirror, platform_images),
        status_server_url=None if (server := _status_server(v)) is None else server.base_url,
        workspace=cfg.storage.mount_path if cfg.storage is not None else None,
        file_server=files_on(v),
        notebook=bool(notebooks),
    )
    net = cfg.tenancy.network_policies
    network = (
        NetworkSettings(
            egress_cidrs=tuple(net.egress),
            egress_except=tuple(net.egress_except),
            dns_namespace=net.dns_namespace,
            dns_pod_labels=tuple(sorted(net.dns_pod_labels.items())),
            data_cache=cfg.data_cache.enabled,
            status_server=_status_port(v),
            file_server=(
                ProxiedPort(tuple(sorted(files.POD_LABELS.items())), files.PORT, tuple(net.api_server_sources))
                if files_on(v)
                else None
            ),
            api_server=None if net.api_server is None else ApiServer(tuple(net.api_server.cidrs), net.api_server.port),
        )
        if net.enabled
        else None
    )
    return tenancy_plan(
        cfg.teams,
        trainer_ns,
        cfg.kubernetes.version,
        cfg.allow_data_loss,
        cluster_queues={t.name: cluster_queue_name(t) for t in cfg.teams},
        admission=admission,
        network=network,
        ephemeral_storage=cfg.tenancy.ephemeral_storage,
        file_service=files_on(v),
        mirror=mirror,
        team_claim=None if cfg.storage is None else (cfg.storage.claim_name, cfg.storage.mount_path),
    )


def file_ids(v: Validated) -> tuple[int, int]:
    """The uid and gid the team file service reads as: the runtimes' (what their jobs write as)."""
    sc = v.config.runtimes.security_context
    return (sc.run_as_user, sc.run_as_group) if sc.enabled else (DEFAULT_ID, DEFAULT_ID)


def files_on(v: Validated) -> bool:
    return v.config.storage is not None and v.config.storage.files.enabled


def plan_storage(v: Validated) -> PlanPart:
    cfg = v.config
    return storage_plan(cfg.storage, cfg.teams, cfg.images.registry_mirror, cfg.allow_data_loss, file_ids(v))


def plan_data_cache(v: Validated) -> PlanPart:
    cfg = v.config
    return PlanPart(objects=tuple(data_cache_objects(cfg.data_cache, [t.resolved_namespace for t in cfg.teams])))


def plan_pools_and_queues(v: Validated) -> PlanPart:
    cfg = v.config
    kueue_api = v.releases.by_name["kueue"].api_versions[kueue.GROUP]
    pools = node_pool_plan(v.pools, cfg.images.registry_mirror, cfg.cloud, cfg.allow_data_loss)
    queues = queues_plan(kueue_api, cfg.queues, cfg.teams, v.queues).objects
    return PlanPart(objects=(*pools.objects, *queues), resources=pools.resources)


def plan_catalog(v: Validated) -> PlanPart:
    return catalog_plan(v.serve, v.catalog, v.selection)


def observed_facts(v: Validated) -> PlatformFacts:
    """What the alerts and dashboards are about: each controller's metrics endpoint, each team's
    ClusterQueue and namespace, each node pool."""
    endpoints = [
        endpoint
        for component in COMPONENTS
        if (release := v.releases.by_name.get(component.name)) is not None
        and (endpoint := component.metrics_endpoint(release)) is not None
    ]
    teams = tuple(ObservedTeam(t.name, t.resolved_namespace, cluster_queue_name(t)) for t in v.config.teams)
    return PlatformFacts(tuple(endpoints), teams, tuple(p.name for p in v.pools), POOL_LABEL)


def plan_observability(v: Validated) -> PlanPart:
    return observability_plan(v.config.observability, observed_facts(v))


PLANNERS: list[Callable[[Validated], PlanPart]] = [
    plan_components,
    plan_tenancy,
    plan_storage,
    plan_data_cache,
    plan_pools_and_queues,
    plan_catalog,
    plan_observability,
]


def _sort_key(obj: ManagedObject) -> tuple[int, str, str, str, str]:
    m = obj.manifest
    kind = str(m["kind"])
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    md = m["metadata"]
    return (rank, str(m["apiVersion"]), kind, str(md.get("namespace", "")), str(md["name"]))


def unique_sorted(objects: Iterable[ManagedObject]) -> tuple[ManagedObject, ...]:
    """Objects in apply order; two different objects under one key are a config error, not a silent pick."""
    unique: dict[str, ManagedObject] = {}
    clashes: list[ConfigIssue] = []
    for obj in objects:
        seen = unique.setdefault(obj.key, obj)
        if seen != obj:
            md = obj.manifest["metadata"]
            name = f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]
            hint = "rename one: a team, namespace, pool or runtime is named like another or like a platform object"
            clashes.append(ConfigIssue("", f"two different {obj.manifest['kind']} objects named {name}", None, hint))
    if clashes:
        raise ConfigError(clashes, "the plan")
    return tuple(sorted(unique.values(), key=_sort_key))


def build_plan(v: Validated) -> Plan:
    parts = [planner(v) for planner in PLANNERS]
    objects = unique_sorted(o for p in parts for o in p.objects)
    cfg = v.config
    controllers = {c.name for c in COMPONENTS if c.settings_model is not None}
    kubeconfig = cfg.kubernetes.kubeconfig
    return Plan(
        releases=tuple(r for p in parts for r in p.releases),
        gates=tuple(g for p in parts for g in p.gates),
        objects=objects,
        protect_crds=not cfg.allow_data_loss,
        outputs={
            "kubernetesVersion": cfg.kubernetes.version,
            "versions": {k: r for k, r in v.releases.versions().items() if k in controllers},
            "namespaces": {k: ns for k, ns in v.releases.namespaces().items() if k in controllers},
        },
        cluster=ClusterAccess(
            SecretValue(kubeconfig.get_secret_value()) if kubeconfig is not None else None, cfg.kubernetes.context
        ),
        resources=tuple(r for p in parts for r in p.resources),
    )
