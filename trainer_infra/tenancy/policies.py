"""Optional per-team ResourceQuota and LimitRange, and the team's Secrets."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.objects import ManagedObject, SecretValue
from trainer_infra.manifests import meta
from trainer_infra.tenancy.protection import TEAM_LABEL
from trainer_infra.tenancy.teams import TeamConfig

POLICY_NAME = "trainer-platform-team"
HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = "HF_TOKEN"  # the variable huggingface_hub reads, so `envFrom: secretRef` works as is


def quota_objects(team: TeamConfig) -> list[ManagedObject]:
    ns, labels = team.resolved_namespace, {TEAM_LABEL: team.name}
    out: list[ManagedObject] = []
    if team.resource_quota is not None:
        out.append(
            ManagedObject(
                {
                    "apiVersion": "v1",
                    "kind": "ResourceQuota",
                    "metadata": meta.metadata(POLICY_NAME, ns, labels),
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
                    "metadata": meta.metadata(POLICY_NAME, ns, labels),
                    "spec": {"limits": [limit]},
                }
            )
        )
    return out


def secret_objects(team: TeamConfig) -> list[ManagedObject]:
    """Values are SecretValue: Pulumi secrets in state and previews, `<secret>` in every render file."""
    wanted: dict[str, dict[str, str]] = {}
    if team.secrets.hf_token is not None:
        wanted[HF_TOKEN_SECRET] = {HF_TOKEN_KEY: team.secrets.hf_token.get_secret_value()}
    for name, data in team.secrets.extra.items():
        wanted[name] = {k: v.get_secret_value() for k, v in data.items()}
    return [
        ManagedObject(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": meta.metadata(name, team.resolved_namespace, {TEAM_LABEL: team.name}),
                "type": "Opaque",
                "stringData": {k: SecretValue(v) for k, v in sorted(data.items())},
            }
        )
        for name, data in sorted(wanted.items())
    ]
