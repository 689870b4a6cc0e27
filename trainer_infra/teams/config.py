"""What a team's settings look like in `teams[]`: members, shared volume, secrets, quotas, Pod Security level.
TeamConfig (`teams/model.py`) composes these."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, StringConstraints

from trainer_infra.core import kube
from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import (
    ContainerResource,
    DnsLabel,
    ImageRef,
    LabelKey,
    LabelValue,
    NonNegativeQuantity,
    PositiveQuantity,
    SecretKey,
)

# Subjects per kind and team: all of them sit in one RoleBinding, and etcd refuses objects over 1.5 MB.
MAX_SUBJECTS = 1000


def _service_account(ref: str) -> str:
    namespace, _, name = ref.rpartition("/")
    if len(namespace) > 63 or len(name) > 253:
        raise ValueError("a namespace has at most 63 characters, a service account name at most 253")
    return ref


def _quota_key(key: str) -> str:
    if (problem := kube.quota_resource_problem(key)) is not None:
        raise ValueError(problem)
    return key


ServiceAccountRef = Annotated[
    str,
    StringConstraints(pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-.a-z0-9]*[a-z0-9])?$"),
    AfterValidator(_service_account),
]
# RBAC subjects: the API server refuses an empty name (it names nobody).
SubjectName = Annotated[str, StringConstraints(min_length=1, max_length=1024)]
# Keys of a ResourceQuota's `hard`: `requests.cpu`, `limits.memory`, `requests.nvidia.com/gpu`, `pods`, ...
QuotaKey = Annotated[str, AfterValidator(_quota_key)]
PodSecurityLevel = Literal["privileged", "baseline", "restricted"]


class MembersConfig(StrictModel):
    """Who may use the team namespace. Users and groups are as your cluster's authenticator names them
    (OIDC claims, IAM mappings); service accounts as `namespace/name` (a bare name means the team's own
    namespace, e.g. a notebook's service account)."""

    users: list[SubjectName] = Field(default_factory=list, max_length=MAX_SUBJECTS)
    groups: list[SubjectName] = Field(default_factory=list, max_length=MAX_SUBJECTS)
    service_accounts: list[ServiceAccountRef] = Field(default_factory=list, max_length=MAX_SUBJECTS)
    manage_runtimes: bool = Field(
        default=False, description="Also create, change and delete TrainingRuntimes in the team namespace."
    )


class TeamStorageConfig(StrictModel):
    """The team's shared volume (needs `storage` at the root)."""

    size: PositiveQuantity = Field(default="100Gi", description="Requested size of the team claim; grow it in place.")


class PlainValue(StrictModel):
    """A value of a team Secret that is not secret (`WANDB_MODE: {plaintext: offline}`): kept as written in
    the stack file, on purpose, so `validate` does not ask to encrypt it. It still reaches pods only
    through the Secret, and renders as `<secret>` like every Secret value."""

    plaintext: str = Field(description="The value, stored as plain text in the stack file.")

    def get_secret_value(self) -> str:
        return self.plaintext


class TeamSecretsConfig(StrictModel):
    """Secrets from Pulumi secret config (`pulumi config set --secret --path
    'trainer-platform:teams[0].secrets.hfToken' hf_...`): rendered as Secrets, never in plaintext."""

    hf_token: SecretStr | None = Field(
        default=None, description="Hugging Face token: Secret `hf-token` (key HF_TOKEN), read by the initializers."
    )
    extra: dict[DnsLabel, Annotated[dict[SecretKey, SecretStr | PlainValue], Field(min_length=1)]] = Field(
        default_factory=dict,
        description="More Opaque Secrets: secret name -> key -> value (`hf-token` is hfToken's); a value that "
        "is not secret is written `{plaintext: <value>}`.",
    )


class ResourceQuotaConfig(StrictModel):
    """A ResourceQuota on the whole namespace, e.g. `hard: {requests.nvidia.com/gpu: 16, pods: 200}`."""

    hard: dict[QuotaKey, NonNegativeQuantity] = Field(default_factory=dict)


class LimitRangeConfig(StrictModel):
    """Per-container defaults and bounds (a LimitRange of type Container), so pods without requests
    still get scheduled sensibly and count against the quota."""

    default_request: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict)
    default: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict, description="Default limits.")
    max: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict)
    min: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict)


class NotebookConfig(StrictModel):
    """The team's notebook: one pod the platform runs in the team namespace (a Deployment), as the platform's
    notebook ServiceAccount, which has exactly the members' rights (so the kubeflow SDK inside submits TrainJobs),
    with the team claim mounted whole at `storage.mountPath` (every job's directory, `jobs/<trainjob>/`), Pod
    Security `restricted`, reaching the API server (`tenancy.networkPolicies.apiServer`) and nothing else the
    team's NetworkPolicies close. docs/data-scientists.md#a-notebook-that-submits."""

    image: ImageRef = Field(
        description="The notebook's image, pulled through `images.registryMirror` when set; admitted in the team "
        "namespace by exact reference (like the runtimes' images). It runs as uid 1000 with a read-only root "
        "file system: HOME and /tmp are emptyDirs."
    )
    command: list[str] = Field(
        default_factory=lambda: ["sleep", "infinity"],
        min_length=1,
        description="What the container runs (e.g. `[jupyter, lab, --ip=0.0.0.0]`); default: nothing but a shell "
        "to exec into.",
    )
    cpu: PositiveQuantity = Field(
        default="500m", description="CPU request; no limit: an idle notebook lends its CPU, a running cell bursts."
    )
    memory: PositiveQuantity = Field(default="2Gi", description="Memory request and limit.")
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Where it runs (e.g. your CPU nodes' labels); default: any untainted node."
    )
