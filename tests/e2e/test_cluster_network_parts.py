"""Pure parts of the real node's cluster networking (run in ``make test``): the DNS pods are the ones the platform's
team policies let a job reach, and the network binaries are built only for the real node."""

from __future__ import annotations

from tests.tenancy.netpol_eval import Network, Pod
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.sandbox import cluster_network as net
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.versions import VersionSet
from trainer_infra.tenancy.network import NetworkSettings, network_policies


def test_a_team_job_reaches_the_sandbox_dns_pods_on_port_53_and_nothing_else_of_theirs() -> None:
    """The CoreDNS pods carry what the rendered DNS policy names (kube-system, k8s-app: kube-dns), so the e2e's
    DNS lookups from team pods prove the platform's policy, not a sandbox-only allowance."""
    objects = net.coredns_manifests("mirror/coredns:v1", "e2e-node-0")
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    dns = Pod(deployment["metadata"]["namespace"], deployment["spec"]["template"]["metadata"]["labels"], "10.252.0.2")
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert service["spec"]["clusterIP"] == net.DNS_SERVICE_IP
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]
    network = Network(network_policies("team-a", "team-a", NetworkSettings()), {"team-a": {}, dns.namespace: {}})
    member = Pod("team-a", {JOBSET_NAME_LABEL: "job"})
    assert network.connects(member, dns, 53, "UDP") and network.connects(member, dns, 53, "TCP")
    assert not network.connects(member, dns, 8080)  # its health port is not part of the allowance


def test_the_network_binaries_are_built_for_the_real_node_only() -> None:
    targets = {t.name: t for t in Builder(VersionSet.from_env()).targets()}
    for name in net.NETWORK_BINARIES:
        assert targets[name].node, f"{name} would be built by every e2e run, not only E2E_NODE=1"
    assert targets["kube-proxy"].version == targets["kubelet"].version  # one k8s.io/kubernetes module
