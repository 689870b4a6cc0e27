"""`teams[]` → namespaces, member RBAC, quotas, limit ranges and secrets (one PlanPart)."""

from __future__ import annotations

from trainer_infra.config.stack import StackConfig
from trainer_infra.plan.model import ManagedObject, PlanPart
from trainer_infra.tenancy.namespaces import team_namespace
from trainer_infra.tenancy.policies import quota_objects, secret_objects
from trainer_infra.tenancy.rbac import shared_roles, team_bindings


def tenancy_plan(cfg: StackConfig) -> PlanPart:
    if not cfg.teams:
        return PlanPart()
    trainer_ns = cfg.components.resolved_namespaces()["trainer"]
    objects: list[ManagedObject] = shared_roles(trainer_ns)
    for team in cfg.teams:
        objects.append(team_namespace(cfg, team))
        objects += team_bindings(team, trainer_ns)
        objects += quota_objects(team)
        objects += secret_objects(team)
    return PlanPart(objects=tuple(objects))
