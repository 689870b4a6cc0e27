"""What the admission policies are made of: the stack facts they read, the kinds they judge, the rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trainer_infra.manifests.pod_rules import PodSchema

if TYPE_CHECKING:
    from trainer_infra.tenancy.deputies import CacheDeputy

#: the team namespace's annotations that hold its allow-lists (comma-separated names), by `variables.team` key
ALLOW_LISTS = {
    "claims": "admission.trainer-platform.io/claims",
    "queues": "admission.trainer-platform.io/queues",
    "serviceAccounts": "admission.trainer-platform.io/service-accounts",
}


@dataclass(frozen=True)
class TeamAdmission:
    """What one team namespace may reference."""

    namespace: str
    claims: tuple[str, ...]
    queues: tuple[str, ...]
    service_accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdmissionSettings:
    """Everything the policies need, resolved by the planner (identities from the charts' release names)."""

    teams: tuple[TeamAdmission, ...]
    trainer_identity: str
    kueue_identity: str | None  # None: Kueue does not manage TrainJobs (no queue or suspend rule)
    #: Kueue manages TrainJobs and admits one by writing it back whole (tenancy/admission/write_back.py)
    kueue_write_back: bool = False
    priority_classes: tuple[str, ...] = ()
    data_cache_service_account: str | None = None
    #: the data cache's deputy (pinned images, settings, runtimes); None: no data cache
    data_cache: CacheDeputy | None = None


@dataclass(frozen=True)
class AdmittedKind:
    """A kind whose objects reach pods, where its schema keeps them, and which pod-spec fields it has."""

    name: str
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]
    #: CEL: the object's pod specs as a list of lists (`variables.specs`; no flatten needed)
    specs: str
    #: CEL: its JobSet `volumeClaimPolicies` (`variables.claimTemplates`), None: it has none
    claim_templates: str | None = None
    pod: PodSchema = field(default_factory=PodSchema)


#: `(kind, settings) -> CEL boolean (true: admitted)`, or None when the rule has nothing to say in this stack
Expression = Callable[[AdmittedKind, AdmissionSettings], str | None]


@dataclass(frozen=True)
class AdmissionRule:
    """One validation in the policy of each kind in `kinds`, and what a data scientist is told when it fails.

    `per_pod`: the expression judges one pod spec `s` and the policy applies it to every pod spec of the object
    (`variables.specs`); otherwise it judges the request (`object`, `oldObject`, `request`, `variables.team`).
    The message may name the team's allow-lists as `{claims}`, `{queues}` and `{serviceAccounts}`.
    """

    name: str
    kinds: tuple[str, ...]
    message: str
    expression: Expression
    per_pod: bool = False
    reason: str = "Forbidden"
