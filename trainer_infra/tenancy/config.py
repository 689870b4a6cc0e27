"""`tenancy` in stack config: the rules every team namespace shares (admission and network)."""

from __future__ import annotations

import ipaddress
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel, DnsSubdomain
from trainer_infra.tenancy.ephemeral_storage import EphemeralStorageConfig
from trainer_infra.tenancy.images import ImagePolicyConfig
from trainer_infra.tenancy.network import PRIVATE_RANGES


def _cidr(value: str) -> str:
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"not a CIDR like 10.0.0.0/8 ({exc})") from None
    return value


Cidr = Annotated[str, AfterValidator(_cidr)]


def _hub_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL like https://hub.example.com")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("a Hub address carries no credentials, query or fragment (the token is sent as a header)")
    return value.rstrip("/")


HubUrl = Annotated[str, AfterValidator(_hub_url)]


class HubConfig(StrictModel):
    """The Hugging Face Hub the dataset and model initializers download from, with the team's token
    (`teams[].secrets.hfToken`). The platform's alone: no TrainJob may set or override it, since it decides where
    the team's token is sent."""

    endpoint: HubUrl | None = Field(
        default=None,
        description="Base URL of the Hub, or of a mirror of it (air-gapped clusters), given to the initializers as "
        "HF_ENDPOINT; null: huggingface_hub's default, https://huggingface.co. Team pods must reach it "
        "(networkPolicies.egress).",
    )


class ApiServerConfig(StrictModel):
    """Where the API server's endpoints are (`kubectl get endpointslices -n default -l
    kubernetes.io/service-name=kubernetes`): NetworkPolicies judge a connection to the `kubernetes` Service after
    it was translated to an endpoint, so the Service's address alone does not let a pod through."""

    cidrs: list[Cidr] = Field(min_length=1, description="The endpoints' addresses (e.g. the control plane's /32s).")
    port: int = Field(ge=1, le=65535, description="The endpoints' port (443 on GKE and EKS; 6443 with kubeadm).")


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
    api_server_sources: list[Cidr] = Field(
        default_factory=list,
        description="Where the API server's connections to pods come from when they do not start on the pod's "
        "node (a managed control plane's range, its konnectivity agents' node range): the team file service "
        "(storage.files) admits them on its port. [] : the node only, which NetworkPolicy never blocks.",
    )
    api_server: ApiServerConfig | None = Field(
        default=None,
        description="The API server's endpoints, which a team's notebook (teams[].notebook) reaches; no other "
        "pod of a team does. Required with a notebook.",
    )


class TenancyConfig(StrictModel):
    """Rules every team namespace shares (admission policies and network)."""

    priority_classes: list[DnsSubdomain] = Field(
        default_factory=list,
        description="PriorityClasses pods in team namespaces may name (TrainingRuntimes, JobSets). None by "
        "default: system-node-critical and the like would outrank the platform's controllers.",
    )
    network_policies: NetworkPoliciesConfig = Field(default_factory=NetworkPoliciesConfig)
    images: ImagePolicyConfig = Field(default_factory=ImagePolicyConfig)
    ephemeral_storage: EphemeralStorageConfig = Field(default_factory=EphemeralStorageConfig)
    hub: HubConfig = Field(default_factory=HubConfig)
