"""`teams[]` → namespaces, member RBAC, quotas, limit ranges and secrets (one PlanPart)."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core.objects import ManagedObject, PlanPart
from trainer_infra.tenancy.namespaces import team_namespace
from trainer_infra.tenancy.policies import quota_objects, secret_objects
from trainer_infra.tenancy.rbac import shared_roles, team_bindings
from trainer_infra.tenancy.teams import TeamConfig


def tenancy_plan(
    teams: Sequence[TeamConfig], trainer_namespace: str, kubernetes: str, allow_data_loss: bool
) -> PlanPart:
    if not teams:
        return PlanPart()
    objects: list[ManagedObject] = shared_roles(trainer_namespace)
    for team in teams:
        objects.append(team_namespace(team, kubernetes, allow_data_loss))
        objects += team_bindings(team, trainer_namespace)
        objects += quota_objects(team)
        objects += secret_objects(team)
    return PlanPart(objects=tuple(objects))
