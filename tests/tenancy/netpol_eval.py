"""Decide a connection the way Kubernetes NetworkPolicy semantics say (networking.k8s.io/v1), for the tests.

A pod is isolated for a direction when any policy of its namespace selects it with that policy type; an
isolated pod allows a connection only if some selecting policy's rule matches the peer and the port.
A connection needs both the source's egress and the destination's ingress (when the destination is a pod).
Covered: podSelector/namespaceSelector (matchLabels, matchExpressions Exists/DoesNotExist/In/NotIn),
ipBlock with except, ports with protocol. Enough for our policies; a real CNI is the opt-in cluster test.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    ip: str = "10.244.0.10"


@dataclass(frozen=True)
class External:
    ip: str


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
            "In": labels.get(key) in values,
            "NotIn": key not in labels or labels[key] not in values,
        }[op]
        if not ok:
            return False
    return True


class Network:
    def __init__(self, policies: list[Obj], namespace_labels: dict[str, dict[str, str]]) -> None:
        self.policies = policies
        self.namespace_labels = {
            ns: {"kubernetes.io/metadata.name": ns, **labels} for ns, labels in namespace_labels.items()
        }

    def _selecting(self, pod: Pod, direction: str) -> list[Obj]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and selects(p["spec"]["podSelector"], pod.labels)
            and direction in p["spec"].get("policyTypes", ["Ingress"])
        ]

    def _peer_matches(self, peer: Obj, policy_ns: str, other: Pod | External) -> bool:
        if "ipBlock" in peer:
            ip = ipaddress.ip_address(other.ip)
            block = peer["ipBlock"]
            inside = ip in ipaddress.ip_network(block["cidr"])
            return inside and not any(ip in ipaddress.ip_network(e) for e in block.get("except", []))
        if isinstance(other, External):
            return False
        if "namespaceSelector" in peer:
            ns_ok = selects(peer["namespaceSelector"], self.namespace_labels.get(other.namespace, {}))
        else:
            ns_ok = other.namespace == policy_ns
        pod_ok = selects(peer.get("podSelector", {}), other.labels)
        return ns_ok and pod_ok

    def _allowed(self, pod: Pod, direction: str, other: Pod | External, port: int, protocol: str) -> bool:
        selecting = self._selecting(pod, direction)
        if not selecting:
            return True
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in selecting:
            for rule in policy["spec"].get(key, []):
                peers = rule.get(peers_key)
                ports = rule.get("ports")
                peer_ok = not peers or any(self._peer_matches(p, pod.namespace, other) for p in peers)
                port_ok = not ports or any(
                    p.get("protocol", "TCP") == protocol and p.get("port", port) == port for p in ports
                )
                if peer_ok and port_ok:
                    return True
        return False

    def connects(self, src: Pod, dst: Pod | External, port: int, protocol: str = "TCP") -> bool:
        if not self._allowed(src, "Egress", dst, port, protocol):
            return False
        return isinstance(dst, External) or self._allowed(dst, "Ingress", src, port, protocol)
