"""A team's Secrets (`teams[].secrets`): the Hugging Face token and the extra Opaque Secrets."""

from __future__ import annotations

from trainer_infra.core.objects import ManagedObject, SecretValue
from trainer_infra.core.upstream import huggingface
from trainer_infra.manifests import meta
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL

HF_TOKEN_SECRET = "hf-token"
HF_TOKEN_KEY = huggingface.TOKEN_ENV  # the variable huggingface_hub reads, so `envFrom: secretRef` works as is


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
