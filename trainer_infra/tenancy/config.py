"""What a team's tenancy settings look like in `teams[]`: members, shared volume, secrets, quotas,
Pod Security level and the decommission marker. TeamConfig (trainer_infra/teams.py) composes these."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, StringConstraints

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel, Quantity

ServiceAccountRef = Annotated[
    str, StringConstraints(pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
]
# Keys of a ResourceQuota's `hard`: `requests.cpu`, `limits.memory`, `requests.nvidia.com/gpu`, `pods`, ...
QuotaKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9./]*[a-z0-9])?$")]
PodSecurityLevel = Literal["privileged", "baseline", "restricted"]


class MembersConfig(StrictModel):
    """Who may use the team namespace. Users and groups are as your cluster's authenticator names them
    (OIDC claims, IAM mappings); service accounts as `namespace/name` (a bare name means the team's own
    namespace, e.g. a notebook's service account)."""

    users: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    service_accounts: list[ServiceAccountRef] = Field(default_factory=list)
    manage_runtimes: bool = Field(
        default=False, description="Also create, change and delete TrainingRuntimes in the team namespace."
    )


class TeamStorageConfig(StrictModel):
    """The team's shared volume (needs `storage` at the root)."""

    size: Quantity = Field(default="100Gi", description="Requested size of the team claim; grow it in place.")


class TeamSecretsConfig(StrictModel):
    """Secrets from Pulumi secret config (`pulumi config set --secret --path
    'trainer-platform:teams[0].secrets.hfToken' hf_...`): rendered as Secrets, never in plaintext."""

    hf_token: SecretStr | None = Field(
        default=None, description="Hugging Face token: Secret `hf-token` (key HF_TOKEN), read by the initializers."
    )
    extra: dict[DnsLabel, dict[str, SecretStr]] = Field(
        default_factory=dict, description="More Opaque Secrets: secret name -> key -> value."
    )


class ResourceQuotaConfig(StrictModel):
    """A ResourceQuota on the whole namespace, e.g. `hard: {requests.nvidia.com/gpu: 16, pods: 200}`."""

    hard: dict[QuotaKey, Quantity] = Field(default_factory=dict)


class LimitRangeConfig(StrictModel):
    """Per-container defaults and bounds (a LimitRange of type Container), so pods without requests
    still get scheduled sensibly and count against the quota."""

    default_request: dict[str, Quantity] = Field(default_factory=dict)
    default: dict[str, Quantity] = Field(default_factory=dict, description="Default limits.")
    max: dict[str, Quantity] = Field(default_factory=dict)
    min: dict[str, Quantity] = Field(default_factory=dict)
