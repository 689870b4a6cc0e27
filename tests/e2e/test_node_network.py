"""Cluster networking on the real node (issue #28, item 1): cluster DNS (CoreDNS as a pod), Service routing
(kube-proxy) and NetworkPolicy enforcement (kube-router), each asserted from what real containers did.

Opt-in like the node's own tests (``E2E_NODE=1``, root); see tests/e2e/README.md "Cluster networking".
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.e2e import cluster_network as net
from tests.e2e.kube import KubeClient, wait_for
from tests.e2e.node_session import NodeSession
from tests.e2e.render import RenderOutput
from tests.e2e.test_node import _pod as node_pod
from trainer_infra.manifests.meta import TEAM_LABEL
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_NODE") != "1", reason="the real node is opt-in: make e2e-node (E2E_NODE=1)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the real node needs root (containerd, runc, mounts, cgroups)"),
]

Obj = dict[str, Any]
NAMESPACE = "net-e2e"
PORT = 7000
#: JobSet's addressing: pod hostname ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` under the headless
#: Service ``<jobset>`` (what torchrun's ``--master-addr`` names)
JOBSET, RJOB = "train", "node"
PEER_HOST = f"{JOBSET}-{RJOB}-0-0"


def _namespace(client: KubeClient, name: str, labels: dict[str, str] | None = None) -> None:
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    wait_for(f"the default ServiceAccount of {name}", lambda: client.get("v1", "ServiceAccount", "default", name), 60)


def _pod(name: str, namespace: str, node: str, image: str, script: str, labels: dict[str, str], **spec: Any) -> Obj:
    """``test_node``'s pod as the platform's runtimes run it (uid 1000, restricted), in ``namespace``."""
    pod = node_pod(name, node, image, script)
    pod["metadata"].update(namespace=namespace, labels=labels)
    pod["spec"].update(terminationGracePeriodSeconds=0, **spec)
    return pod


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


def _log_when_done(client: KubeClient, name: str, namespace: str) -> str:
    def done() -> Obj | None:
        pod = client.get("v1", "Pod", name, namespace)
        return pod if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") else None

    pod = wait_for(f"pod {namespace}/{name} to finish", done, 180)
    log = client.log(name, namespace)
    assert pod["status"]["phase"] == "Succeeded", (pod["status"], log)
    return log


def _echo_server(client: KubeClient, env: NodeSession, namespace: str, labels: dict[str, str], **spec: Any) -> str:
    name = spec.pop("name", "echo")
    client.create(_pod(name, namespace, env.node.name, env.busybox_ref(), ECHO, labels, **spec))
    return _running_ip(client, name, namespace)


def test_a_pod_resolves_services_and_jobset_hostnames_and_connects_through_them(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    _namespace(client, NAMESPACE, {"pod-security.kubernetes.io/enforce": "restricted"})
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
    client.create(_pod("client", NAMESPACE, env.node.name, env.busybox_ref(), script, {}))
    log = _log_when_done(client, "client", NAMESPACE)
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


# -- NetworkPolicy ------------------------------------------------------------------------------------------------


@dataclass
class Listener:
    """A TCP server of the test process on an address of the node's namespace (not a pod): what a private-range
    address outside the cluster looks like to a pod. It counts the connections it accepted."""

    address: str
    port: int
    accepted: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def serve(self) -> Iterator[None]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.address, self.port))
        sock.listen()
        sock.settimeout(0.5)
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                try:
                    conn, peer = sock.accept()
                except TimeoutError:
                    continue
                with conn:
                    self.accepted.append(peer[0])
                    conn.sendall(b"private endpoint answers\n")

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)
            sock.close()


def _team_objects(render: RenderOutput) -> tuple[list[str], list[Obj]]:
    """The render's team namespaces (two) and the NetworkPolicies it renders into them."""
    namespaces = [o for o in render.of_kind("Namespace") if TEAM_LABEL in o["metadata"].get("labels", {})]
    names = sorted(o["metadata"]["name"] for o in namespaces)[:2]
    policies = [p for p in render.of_kind("NetworkPolicy") if p["metadata"]["namespace"] in names]
    return names, [o for o in namespaces if o["metadata"]["name"] in names] + policies


def test_team_network_policies_are_enforced(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    (team, other), objects = _team_objects(env.render)
    for obj in objects:
        client.apply(obj)
    policies = sorted(
        o["metadata"]["name"] for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["namespace"] == team
    )
    assert "trainer-platform-default-deny" in policies and "trainer-platform-dns" in policies, policies
    _namespace(client, team)
    _namespace(client, other)
    # a namespace without policies: the control that every target is reachable when nothing forbids it
    _namespace(client, "no-policy")
    job = {JOBSET_NAME_LABEL: "job-a"}
    peer_ip = _echo_server(client, env, team, job, name=PEER_HOST, hostname=PEER_HOST, subdomain=JOBSET)
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": JOBSET, "namespace": team},
            "spec": {"clusterIP": "None", "selector": job, "publishNotReadyAddresses": True},
        }
    )
    other_ip = _echo_server(client, env, other, {JOBSET_NAME_LABEL: "job-b"})
    private = Listener(net.NODE_IP, 7001)
    with private.serve():
        wait_for("kube-router to program the pods' firewall chains", lambda: _chains_for(env, [PEER_HOST, "echo"]), 60)
        scripts = {
            (team, "member", "job-a"): "; ".join(
                [
                    "sleep 2",  # kube-router adds this pod's own chain when it starts: give it that moment
                    f"nslookup {PEER_HOST}.{JOBSET}.{team}.svc.{net.CLUSTER_DOMAIN}",
                    _connect(f"{PEER_HOST}.{JOBSET}", "own-peer", 15),
                    _parallel(
                        _connect(other_ip, "other-team", 3),
                        _connect(private.address, "private-range", 3, private.port),
                    ),
                ]
            ),
            # the controls: the other team's pod answers its own team, the private address a pod without policies
            (other, "other-member", "job-b"): "sleep 2; " + _connect(other_ip, "own-team", 15),
            ("no-policy", "control", ""): "sleep 2; "
            + _parallel(
                _connect(peer_ip, "team-pod", 3),
                _connect(private.address, "private-range", 15, private.port),
            ),
        }
        for (namespace, name, jobset), script in scripts.items():
            labels = {JOBSET_NAME_LABEL: jobset} if jobset else {}
            client.create(_pod(name, namespace, env.node.name, env.busybox_ref(), script, labels))
        member = _log_when_done(client, "member", team)
        other_member = _log_when_done(client, "other-member", other)
        control = _log_when_done(client, "control", "no-policy")
    # the member's pod: DNS and its own job's peer by JobSet hostname work ...
    assert f"Address: {peer_ip}" in member, member
    assert f"own-peer: {PEER_HOST} echoes own-peer" in member, member
    # ... another team's pod and a private-range address do not, though both answer where policy allows it
    assert "other-team: refused after 3 tries" in member, member
    assert "own-team: echo echoes own-team" in other_member, other_member
    assert "private-range: refused after 3 tries" in member, member
    assert "private-range: private endpoint answers" in control, control
    # and nothing outside the team opens a connection to the team's pod (ingress)
    assert "team-pod: refused after 3 tries" in control, control
    member_ip = client.get("v1", "Pod", "member", team)["status"]["podIP"]
    control_ip = client.get("v1", "Pod", "control", "no-policy")["status"]["podIP"]
    assert member_ip not in private.accepted and control_ip in private.accepted, private.accepted
    # the teams' namespaces are the platform's for the scenarios after this file: its pods go
    for pod in client.list("v1", "Pod", team) + client.list("v1", "Pod", other):
        client.delete("v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
    wait_for("the teams' pods to go", lambda: not client.list("v1", "Pod", team) + client.list("v1", "Pod", other), 60)


def _chains_for(env: NodeSession, pods: list[str]) -> bool:
    rules = subprocess.run(["iptables-save", "-t", "filter"], capture_output=True, text=True, check=False).stdout
    return all(f"POD name:{pod} " in rules for pod in pods)
