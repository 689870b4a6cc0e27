"""Stack config → Plan: the one place where every area's derivations are put together, in a fixed order."""

from __future__ import annotations

from collections.abc import Callable

from trainer_infra.catalog.plan import catalog_plan
from trainer_infra.config.stack import StackConfig
from trainer_infra.plan.controllers import controller_plan
from trainer_infra.plan.model import ManagedObject, Plan, PlanPart
from trainer_infra.queues.plan import pools_and_queues_plan
from trainer_infra.storage.plan import storage_plan
from trainer_infra.tenancy.plan import tenancy_plan

KIND_ORDER = ("Namespace", "CustomResourceDefinition", "StorageClass", "ClusterRole", "ClusterRoleBinding")

# Each area of the platform contributes one PlanPart; a new area is one function plus one line here.
PLANNERS: list[Callable[[StackConfig], PlanPart]] = [
    controller_plan,
    tenancy_plan,
    storage_plan,
    pools_and_queues_plan,
    catalog_plan,
]


def _sort_key(obj: ManagedObject) -> tuple[int, str, str, str, str]:
    m = obj.manifest
    kind = str(m["kind"])
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    md = m["metadata"]
    return (rank, str(m["apiVersion"]), kind, str(md.get("namespace", "")), str(md["name"]))


class PlanConflictError(ValueError):
    """Two areas want different objects under one name: a bug, never silently resolved."""


def build_plan(cfg: StackConfig) -> Plan:
    parts = [planner(cfg) for planner in PLANNERS]
    unique: dict[str, ManagedObject] = {}
    for obj in (o for p in parts for o in p.objects):
        seen = unique.setdefault(obj.key, obj)
        if seen != obj:
            raise PlanConflictError(f"two different objects named {obj.key}")
    return Plan(
        releases=tuple(r for p in parts for r in p.releases),
        gates=tuple(g for p in parts for g in p.gates),
        objects=tuple(sorted(unique.values(), key=_sort_key)),
        protect_crds=not cfg.allow_data_loss,
        outputs={
            "kubernetesVersion": cfg.kubernetes.version,
            "versions": cfg.components.resolved_versions(),
            "namespaces": cfg.components.resolved_namespaces(),
        },
    )
