"""A team's optional ResourceQuota and LimitRange (`teams[].resourceQuota`, `teams[].limitRange`), both named
LIMITS_NAME in the team namespace."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.objects import ManagedObject
from trainer_infra.manifests import meta
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL

LIMITS_NAME = "trainer-platform-team"


def limit_objects(team: TeamConfig) -> list[ManagedObject]:
    ns, labels = team.resolved_namespace, {TEAM_LABEL: team.name}
    out: list[ManagedObject] = []
    if team.resource_quota is not None:
        out.append(
            ManagedObject(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": meta.metadata(LIMITS_NAME, ns, labels),
                    "spec": {"hard": dict(sorted(team.resource_quota.hard.items()))},
                }
            )
        )
    if team.limit_range is not None:
        lr = team.limit_range
        limit: dict[str, Any] = {"type": "Container"}
        for key, value in (
            ("default", lr.default),
            ("defaultRequest", lr.default_request),
            ("max", lr.max),
            ("min", lr.min),
        ):
            if value:
                limit[key] = dict(sorted(value.items()))
        out.append(
            ManagedObject(
                {
                    "apiVersion": "v1",
                    "kind": "LimitRange",
                    "metadata": meta.metadata(LIMITS_NAME, ns, labels),
                    "spec": {"limits": [limit]},
                }
            )
        )
    return out
