"""Teams (`teams[]`): the tenants of the platform: who (members), where (namespace, Pod Security), their data
(storage, secrets) and their share of the pools (quota, LocalQueue, fair sharing weight)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.quantity import quantity
from trainer_infra.core.types import DnsLabel, NonNegativeQuantity
from trainer_infra.teams.config import (
    LimitRangeConfig,
    MembersConfig,
    NotebookConfig,
    PodSecurityLevel,
    ResourceQuotaConfig,
    TeamSecretsConfig,
    TeamStorageConfig,
)
from trainer_infra.teams.quota import PoolQuota


def _weight(value: str) -> str:
    """Kueue's webhook (validateFairSharing): 0, or more than 1n (smaller positive weights collapse)."""
    if 0 < quantity(value) <= Decimal("1e-9"):
        raise ValueError("must be 0 or more than 1n (Kueue refuses smaller positive weights)")
    return value


FairSharingWeight = Annotated[NonNegativeQuantity, AfterValidator(_weight)]


class TeamConfig(StrictModel):
    name: DnsLabel = Field(description="Team name; used in object names.")
    namespace: DnsLabel | None = Field(default=None, description="Team namespace (default: the team name).")
    # Who, where their data lives, what they may use (applied by trainer_infra/tenancy).
    members: MembersConfig = Field(default_factory=MembersConfig)
    storage: TeamStorageConfig = Field(default_factory=TeamStorageConfig)
    secrets: TeamSecretsConfig = Field(default_factory=TeamSecretsConfig)
    resource_quota: ResourceQuotaConfig | None = None
    limit_range: LimitRangeConfig | None = None
    pod_security: PodSecurityLevel = Field(
        default="baseline",
        description="Pod Security Standard enforced on the namespace. restricted admits the catalog runtimes "
        "with runtimes.securityContext on (the default; the MPI runtimes' sshd with NET_BIND_SERVICE added).",
    )
    allow_privileged: bool = Field(
        default=False,
        description="Accept podSecurity: privileged for a team with members. Privileged pods own the node: "
        "only for teams you trust with the cluster.",
    )
    job_service_accounts: list[DnsLabel] = Field(
        default_factory=list,
        description="ServiceAccounts of the team namespace its jobs may run as, besides `default` (e.g. one "
        "with cloud storage access). Any other is refused at admission.",
    )
    decommission: bool = Field(
        default=False,
        description="Drop the protection of the team namespace and claim (step 1 of removing a team; "
        "deletes nothing by itself).",
    )
    quota: dict[str, PoolQuota] = Field(default_factory=dict, description="Nominal quota per node pool name.")
    local_queue: DnsLabel = Field(default="default", description="LocalQueue name in the team namespace.")
    fair_sharing_weight: FairSharingWeight | None = Field(
        default=None, description="The team's share in the cohort under fair sharing (Kueue default 1)."
    )
    notebook: NotebookConfig | None = Field(
        default=None, description="A notebook the platform runs in the team namespace (off by default)."
    )

    @property
    def resolved_namespace(self) -> str:
        return self.namespace or self.name
