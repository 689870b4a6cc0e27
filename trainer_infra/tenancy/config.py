"""What a team's tenancy settings look like in `teams[]`: members, shared volume, secrets, quotas,
Pod Security level and the decommission marker. TeamConfig (trainer_infra/teams.py) composes these."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, SecretStr, StringConstraints

from trainer_infra.core import kube
from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import (
    ContainerResource,
    DnsLabel,
    DnsSubdomain,
    NonNegativeQuantity,
    PositiveQuantity,
    SecretKey,
)
from trainer_infra.tenancy.network import PRIVATE_RANGES

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


def _cidr(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"not a CIDR like 10.0.0.0/8 ({exc})") from None
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]


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


class NetworkPoliciesConfig(StrictModel):
    """Default-deny NetworkPolicies in every team namespace, with what training needs allowed: pods of the
    team's jobs among themselves, cluster DNS, egress to `egress` minus `egressExcept`. Enforced only by a
    CNI that implements NetworkPolicy (most do; kindnet since 0.24 and Cilium, Calico do)."""

    enabled: bool = True
    egress: list[Cidr] = Field(
        default_factory=lambda: ["0.0.0.0/0"],
        description="CIDRs team pods may reach (model hubs, object stores); [] for none.",
    )
    egress_except: list[Cidr] = Field(
        default_factory=lambda: list(PRIVATE_RANGES),
        description="CIDRs carved out of `egress`: private ranges, link-local (cloud metadata), CGNAT.",
    )
    dns_namespace: DnsLabel = Field(default="kube-system", description="Namespace of the cluster DNS pods.")
    dns_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {"k8s-app": "kube-dns"}, description="Labels of the cluster DNS pods."
    )


class TenancyConfig(StrictModel):
    """Rules every team namespace shares (admission policies and network)."""

    priority_classes: list[DnsSubdomain] = Field(
        default_factory=list,
        description="PriorityClasses pods in team namespaces may name (TrainingRuntimes, JobSets). None by "
        "default: system-node-critical and the like would outrank the platform's controllers.",
    )
    network_policies: NetworkPoliciesConfig = Field(default_factory=NetworkPoliciesConfig)
