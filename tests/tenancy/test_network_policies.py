"""Team NetworkPolicies: the connections training needs pass, every cross-team and platform route is closed.
Decided by tests/netpol_eval.py (NetworkPolicy semantics); enforcement itself needs a CNI (opt-in cluster test)."""

from __future__ import annotations

import pytest

from tests.tenancy.netpol_eval import External, Network, Pod
from trainer_infra.core.upstream.lws import NAME_LABEL as LWS_POD_LABEL
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.tenancy.network import NetworkSettings, network_policies

TEAM_LABEL = "trainer-platform.io/team"


def cluster(settings: NetworkSettings) -> Network:
    policies = network_policies("nlp", "nlp", settings) + network_policies("vision", "vision", settings)
    namespaces = {
        "nlp": {TEAM_LABEL: "nlp"},
        "vision": {TEAM_LABEL: "vision"},
        "kube-system": {},
        "trainer-platform-storage": {},
        "kueue-system": {},
    }
    return Network(policies, namespaces)


def job_pod(ns: str, job: str, ip: str = "10.244.1.5") -> Pod:
    return Pod(ns, {JOBSET_NAME_LABEL: job, "jobset.sigs.k8s.io/replicatedjob-name": "node"}, ip)


DNS = Pod("kube-system", {"k8s-app": "kube-dns"}, "10.244.0.2")
NFS = Pod("trainer-platform-storage", {"app": "nfs-server"}, "10.244.0.3")
KUEUE_WEBHOOK = Pod("kueue-system", {"control-plane": "controller-manager"}, "10.244.0.4")


@pytest.fixture
def net() -> Network:
    return cluster(NetworkSettings())


def test_pods_of_a_trainjob_reach_each_other_on_rendezvous_and_sshd(net: Network) -> None:
    a, b = job_pod("nlp", "llm"), job_pod("nlp", "llm", "10.244.1.6")
    for port in (29500, 22, 2222):
        assert net.connects(a, b, port) and net.connects(b, a, port)


def test_other_teams_pods_are_unreachable_both_ways(net: Network) -> None:
    nlp, vision = job_pod("nlp", "llm"), job_pod("vision", "resnet")
    assert not net.connects(vision, nlp, 29500)
    assert not net.connects(nlp, vision, 29500)
    assert not net.connects(Pod("vision", {}), nlp, 22)


def test_dns_only_on_port_53(net: Network) -> None:
    pod = job_pod("nlp", "llm")
    assert net.connects(pod, DNS, 53, "UDP") and net.connects(pod, DNS, 53, "TCP")
    assert not net.connects(pod, DNS, 8080)


def test_no_route_to_the_nfs_server_or_the_webhooks(net: Network) -> None:
    pod = job_pod("nlp", "llm")
    assert not net.connects(pod, NFS, 2049)
    assert not net.connects(pod, KUEUE_WEBHOOK, 9443)


def test_egress_internet_but_not_private_ranges_or_cloud_metadata(net: Network) -> None:
    pod = job_pod("nlp", "llm")
    assert net.connects(pod, External("140.82.112.3"), 443)  # e.g. huggingface.co / github.com
    for ip in ("10.0.0.5", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1"):
        assert not net.connects(pod, External(ip), 443), ip


def test_egress_can_be_narrowed_to_configured_cidrs() -> None:
    net = cluster(NetworkSettings(egress_cidrs=("203.0.113.0/24",)))
    pod = job_pod("nlp", "llm")
    assert net.connects(pod, External("203.0.113.7"), 443)
    assert not net.connects(pod, External("140.82.112.3"), 443)
    closed = cluster(NetworkSettings(egress_cidrs=()))
    assert not closed.connects(pod, External("140.82.112.3"), 443)
    assert closed.connects(pod, DNS, 53, "UDP")


def test_data_cache_pods_serve_the_teams_jobs_only() -> None:
    net = cluster(NetworkSettings(data_cache=True))
    head = Pod("nlp", {LWS_POD_LABEL: "llm-cache"}, "10.244.2.1")
    assert net.connects(job_pod("nlp", "llm"), head, 50051)
    assert not net.connects(job_pod("vision", "resnet"), head, 50051)
    assert not cluster(NetworkSettings()).connects(job_pod("nlp", "llm"), head, 50051)


def test_render_is_deterministic() -> None:
    assert network_policies("nlp", "nlp", NetworkSettings()) == network_policies("nlp", "nlp", NetworkSettings())
