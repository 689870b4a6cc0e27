"""Admission rules on every Service of a team namespace: ClusterIP only, reachable from the cluster alone (the
data cache's own Service is judged further in `datacache/admission.py`)."""

from __future__ import annotations

from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind


def _cluster_ip(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return "!has(object.spec.type) || object.spec.type == 'ClusterIP'"


CLUSTER_IP = AdmissionRule(
    "serviceClusterIp",
    ("Service",),
    "spec.type must be ClusterIP: LoadBalancer, NodePort and ExternalName Services expose or redirect "
    "traffic outside the team namespace",
    _cluster_ip,
)


def _no_external(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    s = "object.spec"
    return (
        f"(!has({s}.externalIPs) || size({s}.externalIPs) == 0) && !has({s}.loadBalancerIP) && "
        f"(!has({s}.ports) || {s}.ports.all(p, !has(p.nodePort) || p.nodePort == 0))"
    )


NO_EXTERNAL = AdmissionRule(
    "serviceExternal",
    ("Service",),
    "spec.externalIPs, loadBalancerIP and nodePort are refused: an external IP captures that address's "
    "traffic cluster-wide (CVE-2020-8554)",
    _no_external,
)
