"""The sandbox for the real install path: an empty control plane and a real node that ``pulumi up`` fills.

Unlike ``Sandbox`` (which applies CRDs, starts JobSet/Kueue/Trainer with harness-written configs and registers
their webhooks by URL), ``ChartSandbox`` starts only etcd, the API server, controller-manager, scheduler and kwok,
then a real node (``node.py``: kubelet + containerd + runc + CNI) with its cluster network (``cluster_network.py``:
kube-proxy, CoreDNS as a pod, kube-router). The charts' controllers are pods on that node, pulled from the local
OCI registry under their upstream references through the stack's ``images.registryMirror`` (images made from the
binaries the e2e builds: ``controller_images.py``), with the charts' probes, memory limits, securityContext,
volumes and RBAC applied by the kubelet. The API server dials Service endpoints (``--enable-aggregator-routing``):
the webhooks and Kueue's visibility APIService are reached at the pods' addresses on the node's bridge, in the
session's own network namespace.

Placement: the real node is tainted (``REAL_NODE_TAINT``); the stack's controllers tolerate it and select it
(``placement_values``), as production puts controllers on a system pool. Everything else that is not a GPU
workload (the in-cluster NFS server, the NFS CSI driver: no NFS in this kernel) stays on an untainted kwok node
(``SYSTEM_NODE``), the GPU pools on kwok nodes as before.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer_infra.core.upstream import kubernetes
from trainer_infra.observability.objects import COMPONENT_LABEL, MONITORING
from trainer_infra.sandbox import cluster_network as net
from trainer_infra.sandbox import node as node_mod
from trainer_infra.sandbox import node_host
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.cluster_network import NETWORK_BINARIES, ClusterNetwork
from trainer_infra.sandbox.controller_images import build_all
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.node import NODE_SANDBOX_BINARIES, RealNode, publish
from trainer_infra.sandbox.oci_images import pause_image
from trainer_infra.sandbox.processes import TIMEOUT, log_tail
from trainer_infra.sandbox.versions import VersionSet, binary_dir

Obj = dict[str, Any]
SYSTEM_NODE = "e2e-system"
#: the real node: the controllers' (and CoreDNS's) only node
REAL_NODE = "e2e-node-0"
#: keeps every pod that does not tolerate it (the NFS server and driver, which cannot run here) off the real node
REAL_NODE_TAINT = {"key": "e2e.trainer-platform/real-node", "value": "controllers", "effect": "NoSchedule"}
#: the chart Deployments' namespaces (the stack's defaults)
CONTROLLER_NAMESPACES = ("jobset-system", "kueue-system", "kubeflow-system")


def placement_values() -> dict[str, Obj]:
    """``components.<name>.values`` that put each chart's controller on the real node (LWS: Trainer's subchart)."""
    pod = {
        "nodeSelector": {kubernetes.HOSTNAME_LABEL: REAL_NODE},
        "tolerations": [{**REAL_NODE_TAINT, "operator": "Equal"}],
    }
    return {
        "jobset": {"controller": pod},
        "kueue": {"controllerManager": pod},
        "trainer": {"manager": pod, "lws": pod},
    }


#: the NFS CSI node plugin tolerates every taint: kept off the real node by affinity (it cannot mount NFS here)
NFS_DRIVER_VALUES: Obj = {
    "node": {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "e2e.trainer-platform/node", "operator": "NotIn", "values": ["real"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
}


class ControllerPodError(AssertionError):
    """A controller pod crash-looped, was OOM-killed, or is not Ready."""


class ChartSandbox(Sandbox):
    """Control plane + kwok + a real node and its network; the platform itself comes from Pulumi.

    ``archives``: the chart archives the registry serves (``charts.repositoryMirror``) beside the images;
    ``previous``: version sets whose controller images are published too (an upgrade's start release,
    ``previous_release.py``), each one's controllers that the sandbox's set does not run."""

    apiserver_args = (
        "--enable-aggregator-routing=true",
        # pods reach the API server through the ``kubernetes`` Service, whose endpoint is the node's address
        "--bind-address=0.0.0.0",
        f"--advertise-address={net.NODE_IP}",
    )
    #: the real node's taints: the controllers' node only (a subclass that trains on it too leaves it untainted)
    node_taints: tuple[Obj, ...] = (REAL_NODE_TAINT,)
    #: NetworkPolicies enforced on the real node (kube-router). ``make bench-pulumi`` turns it off: a cluster's
    #: enforcer runs on its nodes, not on the machine that runs `pulumi up`, and here both share 2 cores
    firewall: bool = True
    #: the real node's per-pod PID limit, from the pool the stack puts it in; None: the kubelet's default
    pod_pids_limit: int | None = None

    def __init__(
        self,
        workdir: Path,
        archives: list[Path] | None = None,
        previous: Sequence[VersionSet] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(workdir, **kwargs)
        self.archives = list(archives or [])
        self.previous = tuple(previous)
        self.registry: ChartRegistry | None = None
        self.node: RealNode | None = None
        self.network: ClusterNetwork | None = None
        #: seconds per start step (the e2e README's "CI budget" reads them)
        self.times: dict[str, float] = {}
        #: upstream reference → manifest digest of every controller image published
        self.published: dict[str, str] = {}

    def _check_binaries(self) -> None:
        super()._check_binaries()
        missing = [n for n in (*NODE_SANDBOX_BINARIES, *NETWORK_BINARIES) if not (self.bin_dir / n).exists()]
        if missing:
            raise node_host.NodeError(
                f"binaries {missing} are missing in {self.bin_dir}: run trainer-infra sandbox build --node"
            )

    def _start(self) -> None:
        node_host.preflight()
        net.preflight()
        self._start_control_plane()
        self._system_node()
        cert = self.ca.issue("chart-mirror", "chart-mirror", hosts=("127.0.0.1",))
        self.registry = ChartRegistry(self.archives, cert=cert.cert, key=cert.key).start()
        self._publish_images()
        builder = Builder(self.versions)
        pause_ref = publish(self.registry, node_mod.PAUSE_IMAGE, pause_image(builder.binary("pause")))
        self.node = RealNode(
            self,
            self.workdir / "node",
            registry_hosts={node_mod.MIRROR.split("/")[0]: f"https://{self.registry.host}"},
            registry_ca=self.ca.cert_path,
            sandbox_image=pause_ref,
            name=REAL_NODE,
            node_ip=net.NODE_IP,
            cluster_dns=net.DNS_SERVICE_IP,
            taints=list(self.node_taints),
            pod_pids_limit=self.pod_pids_limit,
        )
        start = time.monotonic()
        self.node.start()
        self.times["real node Ready"] = round(time.monotonic() - start, 1)
        self.network = ClusterNetwork(self.node, functools.partial(publish, self.registry), firewall=self.firewall)
        self.network.start()
        self.times.update(self.network.times)
        self._write_state()

    def _publish_images(self) -> None:
        assert self.registry is not None
        for versions, bin_dir in ((self.versions, self.bin_dir), *((v, binary_dir(v)) for v in self.previous)):
            images, times = build_all(versions, bin_dir, skip=self.published)
            self.times.update(times)
            for reference, image in images.items():
                publish(self.registry, reference, image)
                self.published[reference] = image.digest

    def _system_node(self) -> None:
        self.create_kwok_node(SYSTEM_NODE, labels={kubernetes.CONTROL_PLANE_ROLE_LABEL: ""})

        def ready() -> bool:
            conds = self.client.get("v1", "Node", SYSTEM_NODE).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        wait_for(f"kwok to mark {SYSTEM_NODE} Ready", ready, TIMEOUT)

    # -- the controllers' health -------------------------------------------------------------------------------
    def controller_pods(self) -> list[Obj]:
        """The chart pods of the controller namespaces (each must run on the real node)."""
        pods = []
        for ns in CONTROLLER_NAMESPACES:
            pods += [p for p in self.client.list("v1", "Pod", ns) if not p["metadata"].get("deletionTimestamp")]
        return pods

    def controller_problems(self, allowed: dict[str, int] | None = None) -> list[str]:
        """Every controller pod that restarted (more often than ``allowed`` says for ``<ns>/<pod>/<container>``),
        was OOM-killed, is not Ready or runs elsewhere than the real node, each with its container's last log
        lines (the previous run's when it restarted)."""
        allowed = allowed or {}
        problems = []
        pods = self.controller_pods()
        for ns in CONTROLLER_NAMESPACES:
            if not any(p["metadata"]["namespace"] == ns for p in pods):
                problems.append(f"{ns}: no controller pod")
        for pod in pods:
            meta, status = pod["metadata"], pod.get("status", {})
            where = f"{meta['namespace']}/{meta['name']}"
            found = []
            if pod["spec"].get("nodeName") != REAL_NODE:
                found.append(f"on node {pod['spec'].get('nodeName')!r}, not {REAL_NODE}")
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))
            if not ready:
                found.append(f"not Ready (phase {status.get('phase')})")
            for cs in status.get("initContainerStatuses", []) + status.get("containerStatuses", []):
                last = cs.get("lastState", {}).get("terminated") or {}
                now = cs.get("state", {})
                if cs.get("restartCount", 0) > allowed.get(f"{where}/{cs['name']}", 0):
                    found.append(
                        f"container {cs['name']} restarted {cs['restartCount']}× (last exit {last.get('exitCode')} "
                        f"{last.get('reason')})"
                    )
                if "OOMKilled" in (last.get("reason"), (now.get("terminated") or {}).get("reason")):
                    found.append(f"container {cs['name']} was OOM-killed")
                if now.get("waiting"):
                    found.append(
                        f"container {cs['name']} waiting: {now['waiting'].get('reason')} "
                        f"{now['waiting'].get('message', '')}"
                    )
            if found:
                problems.append(f"{where}: {'; '.join(found)}\n{self._logs(pod)}")
        return problems

    def _logs(self, pod: Obj) -> str:
        """The last lines of each container's log (the previous run's too, when it restarted)."""
        meta = pod["metadata"]
        out = []
        for container in pod["spec"].get("containers", []):
            for previous in (True, False):
                try:
                    text = self.client.log(
                        meta["name"], meta["namespace"], container["name"], previous=previous, tail=25
                    )
                except ApiError:
                    continue
                out.append(f"--- {container['name']}{' (previous)' if previous else ''}:\n{text}")
        return "\n".join(out) or "(no logs)"

    def assert_controllers_healthy(self, allowed: dict[str, int] | None = None) -> None:
        """No controller pod restarted (beyond ``allowed``), was OOM-killed, or is not Ready: a crash loop fails
        with its logs."""
        problems = self.controller_problems(allowed)
        if problems:
            raise ControllerPodError("controller pods are not healthy:\n" + "\n".join(problems))

    def metrics_urls(self) -> dict[str, str]:
        """component → the address Prometheus scrapes: each ServiceMonitor the render installed
        (``trainer-platform.io/observability: <component>``) names a Service port; its EndpointSlice gives the
        controller pod's address and port, reachable on the node's bridge from this network namespace."""
        urls = {}
        for ns in CONTROLLER_NAMESPACES:
            for monitor in self.client.list(MONITORING, "ServiceMonitor", ns):
                component = monitor["metadata"].get("labels", {}).get(COMPONENT_LABEL)
                if component is None:
                    continue
                endpoint = monitor["spec"]["endpoints"][0]
                selector = ",".join(f"{k}={v}" for k, v in monitor["spec"]["selector"]["matchLabels"].items())
                services = self.client.list("v1", "Service", ns, label_selector=selector)
                if len(services) != 1:
                    names = [s["metadata"]["name"] for s in services]
                    raise AssertionError(f"ServiceMonitor {ns}/{monitor['metadata']['name']} selects {names}")
                service = services[0]["metadata"]["name"]
                urls[component] = self._endpoint_url(ns, service, endpoint["port"], endpoint["scheme"])
        return urls

    def _endpoint_url(self, namespace: str, service: str, port_name: str, scheme: str) -> str:
        """``<scheme>://<ready pod address>:<port>/metrics`` of ``service``'s port ``port_name``."""
        label = f"{kubernetes.SERVICE_NAME_LABEL}={service}"
        for piece in self.client.list(kubernetes.DISCOVERY_API, "EndpointSlice", namespace, label_selector=label):
            port = next((p["port"] for p in piece.get("ports") or [] if p.get("name") == port_name), None)
            ready = [e for e in piece.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")]
            if port is not None and ready:
                return f"{scheme}://{ready[0]['addresses'][0]}:{port}/metrics"
        raise AssertionError(f"Service {namespace}/{service} has no ready endpoint on its port {port_name!r}")

    def describe(self) -> str:
        """For failure messages: the controller pods' problems and the node's logs' tails."""
        try:
            problems = self.controller_problems()
        except ApiError as exc:
            problems = [f"(cannot list the controller pods: {exc})"]
        lines = problems or ["controller pods: all Ready, no restart"]
        if self.node is not None:
            lines.append(f"kubelet log:\n{log_tail(self.node.workdir / 'logs' / 'kubelet.log', 15)}")
        return "\n".join(lines)

    @uninterruptible
    def stop(self) -> None:
        """The network's CoreDNS and processes, the node (draining its pods), its ipsets, the registry, then the
        control plane; each step runs even when one before failed."""
        errors: list[BaseException] = []
        for step in (
            self.network.stop if self.network else None,
            self.node.stop if self.node else None,
            self.network.remove_ipsets if self.network else None,
            self.registry.stop if self.registry else None,
        ):
            if step is None:
                continue
            try:
                step()
            except Exception as exc:
                errors.append(exc)
        self.registry = None
        super().stop()
        if errors:
            raise errors[0]

    def leftovers(self) -> dict[str, list[str]]:
        """What the node and its network left (empty lists when they cleaned up)."""
        found = self.node.leftovers() if self.node else {}
        if self.network is not None:
            found.update(self.network.leftovers())
        return {k: v for k, v in found.items() if v}
