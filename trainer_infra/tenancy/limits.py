"""A team's optional ResourceQuota and its LimitRange (`teams[].resourceQuota`, `teams[].limitRange` over the
platform's `tenancy.ephemeralStorage` bound), both named LIMITS_NAME in the team namespace: one LimitRange, since
the API server applies the defaults of several in no defined order. The ResourceQuota is what the admin gave the
team's own pods: what the platform runs in the namespace (`reserved`) comes on top."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.quantity import format_amount, quantity
from trainer_infra.manifests import meta
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL
from trainer_infra.tenancy.ephemeral_storage import EphemeralStorageConfig

LIMITS_NAME = "trainer-platform-team"


def _raised(hard: Mapping[str, str], reserved: Mapping[str, Decimal]) -> dict[str, str]:
    """`hard` with each key the platform's pods also count under raised by their share."""
    out = dict(hard)
    for key, value in hard.items():
        if key in reserved:
            resource = key.removeprefix("requests.").removeprefix("limits.")
            out[key] = format_amount(resource, quantity(value) + reserved[key])
    return dict(sorted(out.items()))


def limit_objects(
    team: TeamConfig, ephemeral: EphemeralStorageConfig | None = None, reserved: Mapping[str, Decimal] | None = None
) -> list[ManagedObject]:
    """`reserved`: what the platform's own objects in the namespace count in a ResourceQuota (`hard` key → amount)."""
    ns, labels = team.resolved_namespace, {TEAM_LABEL: team.name}
    out: list[ManagedObject] = []
    if team.resource_quota is not None:
        out.append(
            ManagedObject(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": meta.metadata(LIMITS_NAME, ns, labels),
                    "spec": {"hard": _raised(team.resource_quota.hard, reserved or {})},
                }
            )
        )
    lr = team.limit_range
    platform = ephemeral.limit_range() if ephemeral is not None else {}
    if lr is not None or platform:
        limit: dict[str, Any] = {"type": "Container"}
        for key, value in (
            ("default", lr.default if lr else {}),
            ("defaultRequest", lr.default_request if lr else {}),
            ("max", lr.max if lr else {}),
            ("min", lr.min if lr else {}),
        ):
            merged = {**platform.get(key, {}), **value}
            if merged:
                limit[key] = dict(sorted(merged.items()))
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
