"""Default-deny NetworkPolicies for a team namespace, with exactly the allowances training needs.

Without them every pod reaches every other team's pods (rendezvous and sshd ports), the controllers' webhooks
and the in-cluster NFS server (a user-space NFS client needs no mount privilege and reads the whole export).
Allowed: pods of the team's jobs among themselves (JobSet labels every pod with
`jobset.sigs.k8s.io/jobset-name`; a static policy cannot say "the same value", so the team is the boundary),
the data cache's LeaderWorkerSet pods when the cache is on, cluster DNS, and egress to the configured CIDRs
(by default the internet without private, link-local — cloud metadata — and shared ranges), and with progress on,
the team's training pods to the Trainer controller's pods on the status server's port only (its webhook and
metrics ports stay closed: a member's pod has no business there). The team file service's pods (`storage/files.py`)
get no allowance from any pod: the API server's proxy reaches them from the node, which NetworkPolicy never blocks
(k8s.io/api networking/v1 `NetworkPolicySpec.ingress`: traffic is allowed "if the traffic source is the pod's local
node"), or from `apiServerSources` (a managed control plane). The team's notebook (`notebook.py`), alone, reaches
the API server's endpoints (`tenancy.networkPolicies.apiServer`). Team claims are
mounted by the node (CSI on the host network): pods need no route to the storage server and get none.

Enforcement needs a CNI that implements NetworkPolicy; the render is the same either way.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from trainer_infra.core.upstream import kubernetes, lws
from trainer_infra.manifests import meta
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.tenancy.notebook import NOTEBOOK, NOTEBOOK_LABEL

API = kubernetes.NETWORKING_API
#: Not reachable by default: RFC 1918, link-local (169.254.169.254 is the cloud metadata service), CGNAT.
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10")


@dataclass(frozen=True)
class ControllerPort:
    """One port of a controller's pods that the teams' training pods may open (TCP)."""

    namespace: str
    pod_labels: tuple[tuple[str, str], ...]
    port: int


@dataclass(frozen=True)
class ProxiedPort:
    """A port of platform pods in each team namespace that only the API server's proxy opens (the team file
    service): `sources`, where its connections come from when they do not start on the pod's node."""

    pod_labels: tuple[tuple[str, str], ...]
    port: int
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiServer:
    """The API server's endpoints (addresses, port): a NetworkPolicy judges a connection to the `kubernetes`
    Service after kube-proxy (or the CNI) translated it to one of them."""

    cidrs: tuple[str, ...]
    port: int


@dataclass(frozen=True)
class NetworkSettings:
    """Resolved from the stack config."""

    egress_cidrs: tuple[str, ...] = ("0.0.0.0/0",)
    egress_except: tuple[str, ...] = PRIVATE_RANGES
    dns_namespace: str = "kube-system"
    dns_pod_labels: tuple[tuple[str, str], ...] = (("k8s-app", "kube-dns"),)
    data_cache: bool = False
    #: the Trainer status server (progress on), reached from the training pods only
    status_server: ControllerPort | None = None
    #: the team file service, reached through the API server's proxy only
    file_server: ProxiedPort | None = None
    #: the API server's endpoints, reached by a team's notebook pods only (None: no notebook allowance)
    api_server: ApiServer | None = None


def _exists(label: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": label, "operator": "Exists"}]}


def _policy(name: str, ns: str, team: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": meta.metadata(name, ns, {meta.TEAM_LABEL: team}),
        "spec": spec,
    }


def _pods_in(namespace: str, labels: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """A peer: the pods with `labels` in `namespace`."""
    return {
        "namespaceSelector": {"matchLabels": {kubernetes.NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(labels)},
    }


def _egress(
    name: str, ns: str, team: str, pods: dict[str, Any], peer: dict[str, Any], ports: list[dict[str, Any]]
) -> dict[str, Any]:
    """A policy letting the selected `pods` open `ports` of `peer`."""
    return _policy(
        name, ns, team, {"podSelector": pods, "policyTypes": ["Egress"], "egress": [{"to": [peer], "ports": ports}]}
    )


def _cidr_in(cidr: str, outer: str) -> bool:
    """Whether ``cidr`` lies inside ``outer`` (an ipBlock's `except` must)."""
    inner, container = ipaddress.ip_network(cidr, strict=False), ipaddress.ip_network(outer, strict=False)
    if isinstance(inner, ipaddress.IPv4Network) and isinstance(container, ipaddress.IPv4Network):
        return inner.subnet_of(container)
    if isinstance(inner, ipaddress.IPv6Network) and isinstance(container, ipaddress.IPv6Network):
        return inner.subnet_of(container)
    return False


def network_policies(
    namespace: str, team: str, settings: NetworkSettings, notebook: bool = False
) -> list[dict[str, Any]]:
    """The team namespace's NetworkPolicies (deterministic order); `notebook`: the team has one."""
    training = {"podSelector": _exists(JOBSET_NAME_LABEL)}
    cache = {"podSelector": _exists(lws.NAME_LABEL)}
    peers = [training, cache] if settings.data_cache else [training]
    out = [
        _policy(
            "trainer-platform-default-deny", namespace, team, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
        ),
        _policy(
            "trainer-platform-training",
            namespace,
            team,
            {
                "podSelector": _exists(JOBSET_NAME_LABEL),
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [training]}],
                "egress": [{"to": peers}],
            },
        ),
    ]
    if settings.data_cache:
        out.append(
            _policy(
                "trainer-platform-data-cache",
                namespace,
                team,
                {
                    "podSelector": _exists(lws.NAME_LABEL),
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [training, cache]}],
                    "egress": [{"to": [cache]}],
                },
            )
        )
    if settings.status_server is not None:
        server = settings.status_server
        peer = _pods_in(server.namespace, server.pod_labels)
        ports = [{"protocol": "TCP", "port": server.port}]
        out.append(_egress("trainer-platform-status-server", namespace, team, _exists(JOBSET_NAME_LABEL), peer, ports))
    if settings.file_server is not None and settings.file_server.sources:
        files = settings.file_server
        proxy = {
            "podSelector": {"matchLabels": dict(files.pod_labels)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"ipBlock": {"cidr": cidr}} for cidr in files.sources],
                    "ports": [{"protocol": "TCP", "port": files.port}],
                }
            ],
        }
        out.append(_policy("trainer-platform-files", namespace, team, proxy))
    if notebook and settings.api_server is not None:
        api = settings.api_server
        endpoints = [{"ipBlock": {"cidr": c}} for c in api.cidrs]
        rule = {"to": endpoints, "ports": [{"protocol": "TCP", "port": api.port}]}
        selector = {"matchLabels": {NOTEBOOK_LABEL: "true"}}
        out.append(
            _policy(NOTEBOOK, namespace, team, {"podSelector": selector, "policyTypes": ["Egress"], "egress": [rule]})
        )
    dns_peer = _pods_in(settings.dns_namespace, settings.dns_pod_labels)
    dns_ports = [{"protocol": p, "port": 53} for p in ("UDP", "TCP")]
    out.append(_egress("trainer-platform-dns", namespace, team, {}, dns_peer, dns_ports))
    if settings.egress_cidrs:
        blocks = []
        for cidr in settings.egress_cidrs:
            block: dict[str, Any] = {"cidr": cidr}
            inside = [e for e in settings.egress_except if _cidr_in(e, cidr) and e != cidr]
            if inside:
                block["except"] = inside
            blocks.append({"ipBlock": block})
        out.append(
            _policy(
                "trainer-platform-egress",
                namespace,
                team,
                {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": blocks}]},
            )
        )
    return out
