"""Cluster networking on the real node: Service routing, cluster DNS and NetworkPolicy enforcement by upstream code.

- **kube-proxy** v1.34.4 (``iptables`` mode), built from the ``k8s.io/kubernetes`` module like the kubelet, runs
  as a process of the node's network namespace with the ``system:kube-proxy`` identity (bound to
  ``system:node-proxier`` by the API server's bootstrap policy), as its DaemonSet would with ``hostNetwork``.
- **CoreDNS** v1.15.0 runs as a *pod* on the real node, exactly as kubeadm deploys it (``kube-system``,
  ``k8s-app: kube-dns``, Service ``kube-dns`` at ``DNS_SERVICE_IP``), from an image we build around our CoreDNS
  binary and publish through the mirror. It must be a pod: the platform's team NetworkPolicies allow DNS only to
  pods with those labels. It reaches the API server through the ``kubernetes`` Service (kube-proxy), so the
  API server of a ``NetworkSandbox`` listens on the node's address too.
- **kube-router** v2.1.0's network policy controller (``--run-firewall`` only: no routing, no service proxy)
  enforces NetworkPolicies with iptables and ipsets. ``sigs.k8s.io/kube-network-policies`` (v0.8.0, the
  proxy's) cannot run on this machine kind: it sends packets to user space with the nftables ``queue``
  statement, and the kernel is built without ``CONFIG_NFT_QUEUE`` (no module loading either): ``nft add rule
  inet t c queue num 100`` fails "Could not process rule: No such file or directory". kube-router needs the
  ``ip_set`` and bridge-netfilter features this kernel has (the pods share a bridge: ``br_netfilter`` makes
  bridged packets pass the iptables chains).

Everything stays in the session's network namespace; ``stop`` ends the processes and removes the ipsets (the
iptables rules go with the node's own ``stop``, which removes every rule added since it started).
"""

from __future__ import annotations

import atexit
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.upstream import kubernetes
from trainer_infra.sandbox.build import COREDNS_VERSION, Builder, BuildError
from trainer_infra.sandbox.controlplane import SERVICE_CIDR
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.node import NodeSandbox, RealNode, start_or_undo
from trainer_infra.sandbox.node_host import NodeError
from trainer_infra.sandbox.oci_images import Image, Layer, image
from trainer_infra.sandbox.processes import TIMEOUT, Process, free_port, spawn, terminate, wait_process

Obj = dict[str, Any]

#: the node's address; the API server of a ``NetworkSandbox`` is advertised there (the ``kubernetes`` Service's
#: endpoint), which pods reach through kube-proxy
NODE_IP = "10.250.1.1"
#: the cluster DNS Service's address (kubeadm's choice: the tenth of the Service range)
DNS_SERVICE_IP = "10.96.0.10"
CLUSTER_DOMAIN = "cluster.local"
DNS_NAMESPACE = "kube-system"
#: what the platform's team NetworkPolicies allow DNS to (``tenancy.network.NetworkSettings`` defaults)
DNS_LABELS = {"k8s-app": "kube-dns"}
#: the image reference CoreDNS is published under (upstream's repository, our build)
COREDNS_IMAGE = f"{kubernetes.COREDNS_REPOSITORY}:v{COREDNS_VERSION}"
#: the API server's bootstrap policy binds this user to ``system:node-proxier``
KUBE_PROXY_USER = "system:kube-proxy"
KUBE_ROUTER_USER = "system:kube-router"
NETWORK_BINARIES = ("kube-proxy", "coredns", "kube-router")
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


class NetworkSandbox(NodeSandbox):
    """``NodeSandbox`` whose API server pods can reach: it listens on every address of the session's namespace
    (only loopback and the node's address exist there) and advertises the node's address."""

    apiserver_args = ("--bind-address=0.0.0.0", f"--advertise-address={NODE_IP}")

    def _check_binaries(self) -> None:
        super()._check_binaries()
        missing = [name for name in NETWORK_BINARIES if not (self.bin_dir / name).exists()]
        if missing:
            raise BuildError(
                f"binaries {missing} are missing in {self.bin_dir}: run trainer-infra sandbox build --node"
            )


def preflight() -> None:
    """Name every missing kernel feature with what fixes it (``node_host.preflight`` checks the packages first);
    nothing falls back to running without enforcement."""
    problems = []
    if not BRIDGE_NF.exists():
        problems.append(
            f"{BRIDGE_NF} is missing: the kernel lacks bridge netfilter (CONFIG_BRIDGE_NETFILTER; `modprobe "
            "br_netfilter` where modules can be loaded), without which pod-to-pod traffic on the bridge bypasses "
            "Service NAT and the policy chains"
        )
    elif BRIDGE_NF.read_text().strip() != "1":
        problems.append(f"{BRIDGE_NF} is 0: run `sysctl -w net.bridge.bridge-nf-call-iptables=1`")
    probe = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        problems.append(
            f"`ipset list -n` failed ({probe.stderr.strip()}): the kernel lacks ip_set (CONFIG_IP_SET with "
            "hash:ip and hash:net; `modprobe ip_set` where modules can be loaded), which kube-router's policies need"
        )
    if problems:
        raise NodeError("cluster networking cannot start: " + "; ".join(problems))


def coredns_image(coredns: Path) -> Image:
    """CoreDNS's binary as ``/coredns`` (its Corefile comes from the ConfigMap, as kubeadm mounts it)."""
    layer = Layer()
    layer.file("coredns", coredns.read_bytes(), 0o755)
    layer.directory("etc")
    layer.directory("etc/coredns")
    return image(layer.tar(), {"Entrypoint": ["/coredns"]})


def corefile() -> str:
    """kubeadm's Corefile without ``forward`` (the sandbox has no upstream resolver: other names are NXDOMAIN),
    ``prometheus`` and ``reload``."""
    return (
        ".:53 {\n"
        "    errors\n"
        "    health {\n        lameduck 1s\n    }\n"
        "    ready\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        "        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n        ttl 30\n    }\n"
        f"    cache 30 {{\n        disable success {CLUSTER_DOMAIN}\n        disable denial {CLUSTER_DOMAIN}\n    }}\n"
        "    loop\n"
        "    loadbalance\n"
        "}\n"
    )


def coredns_manifests(image_ref: str, node: str, taints: list[dict[str, str]] | None = None) -> list[Obj]:
    """kubeadm 1.34's CoreDNS objects (cmd/kubeadm/app/phases/addons/dns), one replica pinned to the real node
    (tolerating its ``taints``)."""
    ns = DNS_NAMESPACE
    labels = dict(DNS_LABELS)
    container = {
        "name": "coredns",
        "image": image_ref,
        "args": ["-conf", "/etc/coredns/Corefile"],
        "resources": {"limits": {"memory": "170Mi"}, "requests": {"cpu": "100m", "memory": "70Mi"}},
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": True}],
        "ports": [
            {"containerPort": 53, "name": "dns", "protocol": "UDP"},
            {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
            {"containerPort": 8080, "name": "liveness-probe", "protocol": "TCP"},
            {"containerPort": 8181, "name": "readiness-probe", "protocol": "TCP"},
        ],
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": "liveness-probe"},
            "initialDelaySeconds": 60,
            "timeoutSeconds": 5,
            "failureThreshold": 5,
        },
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "readiness-probe"}, "periodSeconds": 1},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": ns}},
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": "system:coredns"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": [kubernetes.DISCOVERY_GROUP],
                    "resources": ["endpointslices"],
                    "verbs": ["list", "watch"],
                },
            ],
        },
        _binding("system:coredns", {"kind": "ServiceAccount", "name": "coredns", "namespace": ns}),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": ns},
            "data": {"Corefile": corefile()},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": ns, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "priorityClassName": "system-cluster-critical",
                        "serviceAccountName": "coredns",
                        "nodeSelector": {kubernetes.HOSTNAME_LABEL: node},
                        **({"tolerations": [{**t, "operator": "Equal"} for t in taints]} if taints else {}),
                        "containers": [container],
                        "dnsPolicy": "Default",
                        "volumes": [
                            {
                                "name": "config-volume",
                                "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]},
                            }
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "kube-dns",
                "namespace": ns,
                "labels": {**labels, kubernetes.ADDON_NAME_LABEL: "CoreDNS"},
            },
            "spec": {
                "clusterIP": DNS_SERVICE_IP,
                "selector": labels,
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                ],
            },
        },
    ]


def kube_router_rbac() -> list[Obj]:
    """What kube-router's firewall needs (its upstream DaemonSet's ClusterRole, read-only parts)."""
    return [
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": "ClusterRole",
            "metadata": {"name": "e2e:kube-router"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["namespaces", "pods", "services", "nodes", "endpoints"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": [kubernetes.NETWORKING_GROUP],
                    "resources": ["networkpolicies"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": [kubernetes.DISCOVERY_GROUP],
                    "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
        _binding("e2e:kube-router", {"apiGroup": kubernetes.RBAC_GROUP, "kind": "User", "name": KUBE_ROUTER_USER}),
    ]


def _binding(role: str, subject: Obj) -> Obj:
    return {
        "apiVersion": kubernetes.RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role},
        "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }


def kube_proxy_config(kubeconfig: Path, node: RealNode, healthz: int, metrics: int) -> Obj:
    """KubeProxyConfiguration v1alpha1: iptables mode, nothing host-wide touched (the namespace is the node's)."""
    return {
        "apiVersion": kubernetes.KUBE_PROXY_CONFIG_API,
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name,
        "bindAddress": node.node_ip,
        "healthzBindAddress": f"127.0.0.1:{healthz}",
        "metricsBindAddress": f"127.0.0.1:{metrics}",
        "mode": "iptables",
        "clusterCIDR": node.pod_cidr,
        "detectLocalMode": "ClusterCIDR",
        # -999 needs CAP_SYS_RESOURCE, which this machine kind withholds (as for the kubelet and containerd)
        "oomScoreAdj": 0,
        # conntrack table size and timeouts are left as the kernel has them
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
    }


def ipsets() -> list[str]:
    proc = subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True, check=False)
    return sorted(proc.stdout.split()) if proc.returncode == 0 else []


class ClusterNetwork:
    """kube-proxy and kube-router beside ``node``'s kubelet, CoreDNS as a pod on it.

    ``publish(upstream_reference, image)`` serves an image through the mirror and returns the reference the node
    pulls (the tests' ``publish``)."""

    def __init__(self, node: RealNode, publish: Callable[[str, Image], str], *, firewall: bool = True) -> None:
        self.node = node
        #: kube-router enforcing NetworkPolicies (off only for ``make bench-pulumi``: ChartSandbox.firewall)
        self.firewall = firewall
        self.sandbox = node.sandbox
        self.publish = publish
        self.workdir = node.workdir.parent / f"{node.workdir.name}-network"
        self.processes: list[Process] = []
        self.times: dict[str, float] = {}
        self._ipsets_before: list[str] = []
        self.coredns_ref = ""

    def start(self) -> ClusterNetwork:
        """kube-proxy, then kube-router, then CoreDNS; returns when DNS is ready. On failure everything is stopped."""
        preflight()
        start_or_undo(self._start, self.stop)
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._ipsets_before = ipsets()
        client = self.sandbox.client
        builder = Builder(self.sandbox.versions)
        for obj in kube_router_rbac():
            client.apply(obj)
        start = time.monotonic()
        kube_proxy = self._start_kube_proxy(builder)
        wait_process(
            kube_proxy,
            "kube-proxy to program the kubernetes Service",
            lambda: "KUBE-SVC-" in _iptables_save("nat"),
            TIMEOUT,
            NodeError,
        )
        # after kube-proxy's first sync: kube-router rewriting the filter table during it once left kube-proxy
        # without its KUBE-EXTERNAL-SERVICES chain ("Chain ... does not exist"), and the Service unprogrammed
        if self.firewall:
            self._start_kube_router(builder)
        self.times["kube-proxy and kube-router started"] = round(time.monotonic() - start, 1)
        start = time.monotonic()
        self.coredns_ref = self.publish(COREDNS_IMAGE, coredns_image(builder.binary("coredns")))
        for obj in coredns_manifests(self.coredns_ref, self.node.name, self.node.taints):
            client.apply(obj)
        wait_for("CoreDNS to be Ready on the real node", self._coredns_ready, max(TIMEOUT, 120))
        self.times["CoreDNS pod Ready (pull, start, API reached)"] = round(time.monotonic() - start, 1)

    def _kubeconfig(self, name: str, user: str) -> Path:
        cert = self.sandbox.ca.issue(name, user, client=True, directory=self.workdir)
        path = self.workdir / f"{name}.kubeconfig"
        self.sandbox.write_kubeconfig(path, user, cert)
        return path

    def _start_kube_proxy(self, builder: Builder) -> Process:
        config = self.workdir / "kube-proxy.yaml"
        kubeconfig = self._kubeconfig("kube-proxy", KUBE_PROXY_USER)
        config.write_text(yaml.safe_dump(kube_proxy_config(kubeconfig, self.node, free_port(), free_port())))
        return self._spawn("kube-proxy", builder, [f"--config={config}", "--v=2"])

    def _start_kube_router(self, builder: Builder) -> Process:
        kubeconfig = self._kubeconfig("kube-router", KUBE_ROUTER_USER)
        return self._spawn(
            "kube-router",
            builder,
            [
                f"--kubeconfig={kubeconfig}",
                "--run-firewall=true",
                "--run-router=false",
                "--run-service-proxy=false",
                "--enable-cni=false",
                "--enable-ipv4=true",
                "--enable-ipv6=false",
                f"--hostname-override={self.node.name}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--health-port={free_port()}",
                "--metrics-port=0",
                # a full resync rewrites the pods' chains, and a connection in that moment passes (the team pod
                # reached the node's address in two CI runs of 2026-11-26, with a resync every 30 s). Changes sync
                # on their events; the periodic safety net stays out of a sandbox session's few minutes.
                "--iptables-sync-period=15m",
                "--v=2",
            ],
        )

    def _spawn(self, name: str, builder: Builder, args: list[str]) -> Process:
        target = next(t for t in builder.targets() if t.name == name)
        proc = spawn(
            name, target.version, builder.binary(name), args, self.workdir / "logs" / f"{name}.log", self.workdir
        )
        self.processes.append(proc)
        return proc

    def _coredns_ready(self) -> Obj | None:
        for proc in self.processes:
            if not proc.alive():
                raise NodeError(proc.describe_failure("CoreDNS never became Ready"))
        try:
            pods = self.sandbox.client.list("v1", "Pod", DNS_NAMESPACE)
        except ApiError:
            return None
        for pod in pods:
            if pod["metadata"].get("labels", {}).get("k8s-app") != "kube-dns":
                continue
            conds = pod.get("status", {}).get("conditions", [])
            if any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                return pod
        return None

    @uninterruptible
    def stop(self) -> None:
        """CoreDNS's Deployment (its pod then goes with the node's drain, and is not created again), kube-proxy and
        kube-router. The node's ``stop`` comes next (it removes every rule added since it started), then
        ``remove_ipsets``."""
        atexit.unregister(self.stop)
        if self.coredns_ref:
            client = self.sandbox.client
            try:
                client.delete("apps/v1", "Deployment", "coredns", DNS_NAMESPACE)
                wait_for(
                    "CoreDNS's ReplicaSet to be deleted with its Deployment",
                    lambda: not client.list("apps/v1", "ReplicaSet", DNS_NAMESPACE),
                    30,
                )
            except (ApiError, TimeoutError) as exc:
                print(f"[network] CoreDNS's Deployment not removed: {exc}", flush=True)
            self.coredns_ref = ""
        for proc in reversed(self.processes):
            terminate(proc)
        self.processes.clear()

    def remove_ipsets(self) -> None:
        """After the node's ``stop`` removed the rules that referenced them: kube-router's ipsets."""
        for name in sorted(set(ipsets()) - set(self._ipsets_before)):
            subprocess.run(["ipset", "destroy", name], capture_output=True, check=False)

    def leftovers(self) -> dict[str, list[str]]:
        return {
            "network processes": [f"{p.name} ({p.pid})" for p in self.processes if p.alive()],
            "ipsets": sorted(set(ipsets()) - set(self._ipsets_before)),
        }


def _iptables_save(table: str) -> str:
    return subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True, check=False).stdout
