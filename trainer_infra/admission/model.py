"""What the admission policies are made of: the stack facts they read, the kinds they judge, the rules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trainer_infra.manifests.pod_rules import PodSchema

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
class CacheDeputy:
    """What the admission rules need to bound the data cache's identities (`datacache/deputies.py` reads it
    from the served runtimes)."""

    service_account: str
    runtimes: tuple[str, ...]  # ClusterTrainingRuntimes whose pods run as it
    jobs: tuple[str, ...]  # their replicated jobs that run as it
    initializer_images: tuple[str, ...]
    #: env names the runtime gives the pods running as it (Trainer adds STORAGE_URI, members the allow-list)
    initializer_env: tuple[str, ...]
    pinned: tuple[tuple[str, str], ...]  # env the runtime pins (a member may only repeat the value)
    cache_image: str
    size: int
    head: tuple[str, str]  # cpu, memory (requests = limits)
    worker: tuple[str, str]
    iam_role: str


@dataclass(frozen=True)
class ImageAdmission:
    """Where team images may come from (`tenancy/images.py` resolves it from the stack)."""

    registries: tuple[str, ...]
    require_digests: bool
    #: exact references that always pass: the platform's own images in team namespaces
    platform_images: tuple[str, ...]


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
    #: the accelerator resources the stack's pools offer (what messages tell members to request)
    accelerators: tuple[str, ...] = ()
    #: where team images may come from; None: any registry
    images: ImageAdmission | None = None
    #: Trainer's status server (`https://<service>.<namespace>.svc:<port>`) when progress is on: the pods of a
    #: TrainJob's JobSet may carry what Trainer injects for it; None: nothing of it is admitted anywhere
    status_server_url: str | None = None
    #: `storage.mountPath`, where every runtime mounts the TrainJob's own directory of the team claim; None: no
    #: storage (storage/admission.py)
    workspace: str | None = None
    #: the team file service runs in every team namespace (`storage/files.py`): its pods, a Deployment's, may run
    file_server: bool = False
    #: some team has a notebook (tenancy/notebook.py): its pod may run as the notebook's ServiceAccount and carry
    #: its label, no other pod or template may
    notebook: bool = False


def _always(settings: AdmissionSettings) -> bool:
    return True


@dataclass(frozen=True)
class AdmittedKind:
    """A kind judged in team namespaces: where its schema keeps pod specs, which pod-spec fields it has, and
    when and for which requests its policy exists."""

    name: str
    group: str
    version: str
    resource: str
    operations: tuple[str, ...]
    #: CEL: the object's pod specs as a list of lists (`variables.specs`; no flatten needed); None: it carries
    #: none (per-pod rules cannot name it)
    specs: str | None
    #: CEL: its JobSet `volumeClaimPolicies` (`variables.claimTemplates`), None: it has none
    claim_templates: str | None = None
    pod: PodSchema = field(default_factory=PodSchema)
    #: more policy variables (name, CEL), after `team`, `specs` and `claimTemplates`
    variables: tuple[tuple[str, str], ...] = ()
    #: whether this stack has a policy for the kind at all
    applies: Callable[[AdmissionSettings], bool] = _always
    #: the policy's one match condition (name, CEL); None: every create and every update of spec or labels
    match: Callable[[AdmissionSettings], tuple[str, str]] | None = None


#: `(kind, settings) -> CEL boolean (true: admitted)`, or None when the rule has nothing to say in this stack
Expression = Callable[[AdmittedKind, AdmissionSettings], str | None]


@dataclass(frozen=True)
class AdmissionRule:
    """One validation in the policy of each kind in `kinds`, and what a data scientist is told when it fails.

    `per_pod`: the expression judges one pod spec `s` and the policy applies it to every pod spec of the object
    (`variables.specs`); otherwise it judges the request (`object`, `oldObject`, `request`, `variables.team`).
    The message may name the team's allow-lists as `{claims}`, `{queues}` and `{serviceAccounts}`; one that
    quotes the stack's own values (a pinned size, an image) is a function of the settings.
    """

    name: str
    kinds: tuple[str, ...]
    message: str | Callable[[AdmissionSettings], str]
    expression: Expression
    per_pod: bool = False
    reason: str = "Forbidden"

    def message_in(self, settings: AdmissionSettings) -> str:
        return self.message if isinstance(self.message, str) else self.message(settings)
