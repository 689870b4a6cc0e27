"""Cluster networking on the real node (issue #28, item 1): cluster DNS (CoreDNS as a pod) and Service routing
(kube-proxy), asserted from what real containers did. The teams' NetworkPolicies (kube-router) are enforced on the
platform the real ``pulumi up`` installed: tests/e2e/test_sandbox_network.py.

Opt-in like the node's own tests (``E2E_NODE=1``, root); see tests/e2e/README.md "Cluster networking".
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from tests.e2e.node_session import NODE_MARKS, NodeSession
from tests.e2e.pods import RESTRICTED, labelled_pod, log_when_done, namespace
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.sandbox import cluster_network as net
from trainer_infra.sandbox.kube import KubeClient, wait_for

pytestmark = NODE_MARKS

Obj = dict[str, Any]
NAMESPACE = "net-e2e"
PORT = 7000
#: JobSet's addressing: pod hostname ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` under the headless
#: Service ``<jobset>`` (what torchrun's ``--master-addr`` names)
JOBSET, RJOB = "train", "node"
PEER_HOST = f"{JOBSET}-{RJOB}-0-0"


#: a TCP echo: every connection gets one line back naming the server
ECHO = (
    f"printf '#!/bin/sh\\nread line\\necho \"$(hostname) echoes $line\"\\n' > /scratch/echo && chmod +x /scratch/echo "
    f"&& exec nc -ll -p {PORT} -e /scratch/echo"
)


def _connect(target: str, label: str, tries: int, port: int = PORT) -> str:
    """Shell lines: up to ``tries`` connections to ``target``:``port``, one second apart; prints the outcome."""
    return (
        f"ok=''; for i in $(seq {tries}); do r=$(echo {label} | nc -w 2 {target} {port} 2>&1) "
        f'&& [ -n "$r" ] && ok=1 && break; sleep 1; done; '
        f'if [ -n "$ok" ]; then echo "{label}: $r"; else echo "{label}: refused after {tries} tries: $r"; fi'
    )


def _parallel(*parts: str) -> str:
    """Shell lines run side by side (each prints one line)."""
    return " ".join(f"( {part} ) &" for part in parts) + " wait"


def _running_ip(client: KubeClient, name: str, namespace: str) -> str:
    def running() -> str | None:
        status = client.get("v1", "Pod", name, namespace).get("status", {})
        if status.get("phase") in ("Failed", "Succeeded"):
            raise AssertionError(f"{namespace}/{name} ended: {status}")
        return status.get("podIP") if status.get("phase") == "Running" else None

    ip: str = wait_for(f"pod {namespace}/{name} to run", running, 120)
    return ip


def _echo_server(client: KubeClient, env: NodeSession, namespace: str, labels: dict[str, str], **spec: Any) -> str:
    name = spec.pop("name", "echo")
    client.create(labelled_pod(name, namespace, env.node.name, env.busybox_ref(), ECHO, labels, **spec))
    return _running_ip(client, name, namespace)


def test_a_pod_resolves_services_and_jobset_hostnames_and_connects_through_them(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    namespace(client, NAMESPACE, RESTRICTED)
    labels = {JOBSET_NAME_LABEL: JOBSET, "app": "echo"}
    server_ip = _echo_server(client, env, NAMESPACE, labels, name=PEER_HOST, hostname=PEER_HOST, subdomain=JOBSET)
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "echo", "namespace": NAMESPACE},
            "spec": {"selector": {"app": "echo"}, "ports": [{"port": PORT, "targetPort": PORT}]},
        }
    )
    # the headless Service JobSet creates for every JobSet (clusterIP None, named after it, not-ready addresses too)
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": JOBSET, "namespace": NAMESPACE},
            "spec": {"clusterIP": "None", "selector": {JOBSET_NAME_LABEL: JOBSET}, "publishNotReadyAddresses": True},
        }
    )
    cluster_ip = client.get("v1", "Service", "echo", NAMESPACE)["spec"]["clusterIP"]
    script = "; ".join(
        [
            "cat /etc/resolv.conf",
            f"nslookup echo.{NAMESPACE}.svc.{net.CLUSTER_DOMAIN}",
            # busybox nslookup ignores the search path (libc, hence nc, uses it)
            f"nslookup {PEER_HOST}.{JOBSET}.{NAMESPACE}.svc.{net.CLUSTER_DOMAIN}",
            _connect("echo", "via-service", 20),
            _connect(f"{PEER_HOST}.{JOBSET}", "via-hostname", 20),
        ]
    )
    start = time.monotonic()
    client.create(labelled_pod("client", NAMESPACE, env.node.name, env.busybox_ref(), script, {}))
    log = log_when_done(client, "client", NAMESPACE)
    env.times["DNS + Service client pod"] = round(time.monotonic() - start, 1)
    # the kubelet pointed the pod at the cluster DNS Service with the namespace's search path
    assert f"nameserver {net.DNS_SERVICE_IP}" in log, log
    assert f"search {NAMESPACE}.svc.{net.CLUSTER_DOMAIN} svc.{net.CLUSTER_DOMAIN} {net.CLUSTER_DOMAIN}" in log, log
    # CoreDNS answered from the API: the Service's cluster IP, and the pod's own IP for JobSet's hostname
    assert f"Name:\techo.{NAMESPACE}.svc.{net.CLUSTER_DOMAIN}\nAddress: {cluster_ip}" in log, log
    assert f"Name:\t{PEER_HOST}.{JOBSET}.{NAMESPACE}.svc.{net.CLUSTER_DOMAIN}\nAddress: {server_ip}" in log, log
    # both connections reached the echo server's process (its hostname is JobSet's pod hostname)
    assert f"via-service: {PEER_HOST} echoes via-service" in log, log
    assert f"via-hostname: {PEER_HOST} echoes via-hostname" in log, log
    # the Service connection went through kube-proxy's DNAT: conntrack saw cluster IP → pod IP
    entries = subprocess.run(
        ["conntrack", "-L", "-p", "tcp", "--orig-dst", cluster_ip], capture_output=True, text=True, check=False
    ).stdout
    assert f"dport={PORT}" in entries and f"src={server_ip}" in entries, entries
