"""A real node beside the kwok nodes: containerd + runc + CNI (Debian's packages) and the kubelet.

The kubelet is built from the same ``k8s.io/kubernetes`` module as the API server (``build.py --node``);
containerd 1.6, runc 1.1 and the CNI plugins 1.1 are Debian bookworm's (``make e2e-node-deps`` installs them).
Everything runs inside the session's own network and mount namespaces (``netns.wrap(..., mount=True)``): the
pods' bridge, veths, iptables chains and overlay mounts exist only there. Each directory the node uses lies in
its work directory (containerd root/state/socket, kubelet root, pod logs, CNI config and IPAM state), its
cgroups under one cgroup root of its own, and ``stop`` removes all of it: pods, tasks, shims, mounts, the
bridge, the rules, the cgroups, the node address, and the kernel settings the kubelet changes.

Facts this relies on (checked against the pinned sources): kubelet 1.34 still runs on cgroup v1 with
``failCgroupV1: false`` (its default; 1.35 flips it); with containerd 1.6 (no ``RuntimeConfig`` CRI call) the
kubelet takes ``cgroupDriver`` from its config; containerd 1.6 reads registry hosts from ``config_path``
(``hosts.toml`` per host), which is how ``images.registryMirror``'s host reaches the local registry.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.images import ImagesConfig, mirror_image
from trainer_infra.core.upstream import kubernetes
from trainer_infra.core.upstream.containerd import CRI_NAMESPACE
from trainer_infra.nodepools import pids
from trainer_infra.sandbox import host_share, leftovers, netns
from trainer_infra.sandbox.build import KUBE_COMMANDS, PAUSE_VERSION, Builder, BuildError
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.controlplane import KUBELET_CLIENT_USER, Sandbox
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.node_host import (
    BUILTIN_CHAINS,
    CGROUP_FS,
    CGROUP_HIERARCHIES,
    CNI_CACHE,
    CONTAINER_LOG_LINKS,
    HOST_PATHS,
    KUBELET_SYSCTLS,
    NodeError,
    Snapshot,
    containerd_socket,
    existing,
    foreign_shim_sockets,
    iptables_rules,
    mounts_under,
    preflight,
    run_host,
    shim_socket,
    shim_sockets,
)
from trainer_infra.sandbox.oci_images import Image
from trainer_infra.sandbox.processes import TIMEOUT, Process, spawn, terminate, wait_process

#: the CNI network's name (its cache files start with it)
CNI_NETWORK = "trainer-platform-e2e"
#: the pod sandbox image, as upstream names it (published through the mirror like every other image)
PAUSE_IMAGE = f"{kubernetes.PAUSE_REPOSITORY}:{PAUSE_VERSION}"
#: ``images.registryMirror`` as an air-gapped stack sets it; nothing resolves this name but containerd's hosts file
MIRROR = ImagesConfig(registry_mirror="mirror.e2e.internal:5000/k8s").registry_mirror or ""


def publish(registry: ChartRegistry, upstream: str, image: Image) -> str:
    """Serve ``image`` where the stack's mirror puts ``upstream``; return the mirrored reference."""
    mirrored = mirror_image(upstream, MIRROR)
    repository, _, tag = mirrored.partition("/")[2].rpartition(":")
    registry.publish(repository, tag, image)
    return mirrored


def start_or_undo(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """``start``; on failure ``stop`` at once, else at interpreter exit too (a test run that dies still stops the
    processes, which run in sessions of their own). ``stop`` unregisters itself."""
    atexit.register(stop)
    try:
        start()
    except BaseException:
        stop()
        raise


@dataclass
class NodeTimes:
    """Seconds per start step (README's measurements)."""

    containerd: float = 0.0
    kubelet_ready: float = 0.0


class RealNode:
    """containerd + kubelet registering ``name`` with ``sandbox``'s API server.

    ``registry_hosts`` maps a registry host as image references name it (``images.registryMirror``'s host) to
    the URL that serves it (the e2e registry); ``registry_ca`` is what containerd trusts for those URLs.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        workdir: Path,
        *,
        registry_hosts: dict[str, str],
        registry_ca: Path,
        sandbox_image: str,
        name: str = "e2e-node-0",
        node_ip: str = "10.250.1.1",
        pod_cidr: str = "10.252.0.0/24",
        labels: dict[str, str] | None = None,
        cluster_dns: str | None = None,
        taints: list[dict[str, str]] | None = None,
        pod_pids_limit: int | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.workdir = workdir.resolve()
        self.holder = host_share.holder_name(self.workdir)
        self.registry_hosts = dict(registry_hosts)
        self.registry_ca = registry_ca
        self.sandbox_image = sandbox_image
        self.name = name
        self.node_ip = node_ip
        self.pod_cidr = pod_cidr
        self.labels = {"e2e.trainer-platform/node": "real", **(labels or {})}
        #: the address pods resolve names at (``clusterDNS``); None: pods get no name server
        self.cluster_dns = cluster_dns
        #: registered with the Node (``registerWithTaints``): only pods that tolerate them land here
        self.taints = list(taints or [])
        #: the kubelet's per-pod PID limit (``podPidsLimit``) as the node's pool sets it; None: the kubelet's default
        self.pod_pids_limit = pod_pids_limit
        self.bridge = "e2ecni0"
        #: one cgroup subtree of its own in every controller: removable whole, never confused with the host's
        self.cgroup_root = f"/trainer-platform-e2e-{os.getpid()}"
        #: the CNI network's name, per node: the CNI cache (``/var/lib/cni/results``, shared by every node on the
        #: host) names its files after it, and a stop drops only its own
        self.cni_network = f"{CNI_NETWORK}-{os.getpid()}"
        self.socket = containerd_socket(self.workdir)
        self.processes: list[Process] = []
        self.times = NodeTimes()
        self._snapshot: Snapshot | None = None
        self._atexit = False

    # -- layout ---------------------------------------------------------------
    def _dir(self, *parts: str) -> Path:
        path = self.workdir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def containerd_config(self) -> str:
        """containerd 1.6 config (version 2): every path in the work directory, cgroupfs, our CNI, our hosts."""
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        return "\n".join(
            [
                "version = 2",
                f'root = "{self._dir("containerd", "root")}"',
                f'state = "{self._dir("containerd", "state")}"',
                'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", '
                '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]',
                "[grpc]",
                f'  address = "{self.socket}"',
                '[plugins."io.containerd.internal.v1.opt"]',
                f'  path = "{self._dir("containerd", "opt")}"',
                f"[{cri}]",
                f'  sandbox_image = "{self.sandbox_image}"',
                '  stream_server_address = "127.0.0.1"',
                '  stream_server_port = "0"',
                "  enable_cdi = false",
                # this machine kind withholds CAP_SYS_RESOURCE even from root: an oom_score_adj below ours (the
                # pod sandbox's -998, a Guaranteed container's -997) makes runc init fail ("can't get final
                # child's PID from pipe: EOF"); containerd then raises such values to ours instead
                "  restrict_oom_score_adj = true",
                # the pods' network namespaces in the work directory: a node never sees (or removes) another's
                "  netns_mounts_under_state_dir = true",
                f"[{cri}.containerd]",
                '  snapshotter = "overlayfs"',
                '  default_runtime_name = "runc"',
                f"[{cri}.containerd.runtimes.runc]",
                '  runtime_type = "io.containerd.runc.v2"',
                f"[{cri}.containerd.runtimes.runc.options]",
                '  BinaryName = "/usr/sbin/runc"',
                f'  Root = "{self._dir("runc")}"',
                "  SystemdCgroup = false",
                f"[{cri}.cni]",
                '  bin_dir = "/usr/lib/cni"',
                f'  conf_dir = "{self._dir("cni", "net.d")}"',
                f"[{cri}.registry]",
                f'  config_path = "{self._dir("containerd", "certs.d")}"',
                "",
            ]
        )

    def hosts_toml(self, url: str) -> str:
        """containerd's registry hosts file: pull and resolve only from ``url``, trusting the e2e CA."""
        return f'[host."{url}"]\n  capabilities = ["pull", "resolve"]\n  ca = "{self.registry_ca}"\n'

    def cni_config(self) -> dict[str, Any]:
        """A bridge with host-local addresses from ``pod_cidr``, portmap for hostPorts; IPAM state kept here."""
        return {
            "cniVersion": "1.0.0",
            "name": self.cni_network,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # nothing to masquerade to: the namespace has no other network
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self._dir("cni", "ipam")),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def kubelet_config(self) -> dict[str, Any]:
        """KubeletConfiguration v1beta1 for 1.34: webhook authn/authz, cgroupfs on v1, our paths only."""
        pki = self.workdir / "pki"
        return {
            "apiVersion": kubernetes.KUBELET_CONFIG_API,
            "kind": "KubeletConfiguration",
            "address": "0.0.0.0",
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.sandbox.ca.cert_path)},
            },
            "authorization": {"mode": "Webhook"},
            "tlsCertFile": str(pki / "kubelet-serving.crt"),
            "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failCgroupV1": False,
            "failSwapOn": False,
            "staticPodPath": "",
            "clusterDomain": "cluster.local",
            **({"clusterDNS": [self.cluster_dns]} if self.cluster_dns else {}),
            **({"registerWithTaints": self.taints} if self.taints else {}),
            **({pids.KUBELET_KEY: self.pod_pids_limit} if self.pod_pids_limit is not None else {}),
            "resolvConf": str(self.workdir / "resolv.conf"),
            "podLogsDir": str(self._dir("pod-logs")),
            "volumePluginDir": str(self._dir("volume-plugins")),
            "maxPods": 16,
            "serializeImagePulls": True,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "oomScoreAdj": 0,  # -999 needs CAP_SYS_RESOURCE, which this machine kind withholds (see containerd's)
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
        }

    # -- start ----------------------------------------------------------------
    def start(self) -> RealNode:
        """containerd, then the kubelet; returns when the Node is Ready. On failure everything is undone."""
        preflight(self.workdir)
        here = self.snapshot()
        # the host-wide parts as they were before the first node now running changed them (host_share.py)
        original = host_share.join(
            self.holder, host_share.HostState(sysctls=here.sysctls, folders=tuple(here.host_paths))
        )
        self._snapshot = Snapshot(here.devices, here.rules, here.shims, list(original.folders), dict(original.sysctls))
        self._atexit = True
        start_or_undo(self._start, self.stop)
        return self

    def snapshot(self) -> Snapshot:
        return Snapshot(
            devices=netns.devices(),
            rules=iptables_rules(),
            shims=shim_sockets(),
            host_paths=existing(HOST_PATHS),
            sysctls={k: (Path("/proc/sys") / k).read_text().strip() for k in KUBELET_SYSCTLS},
        )

    def _start(self) -> None:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self._dir("logs")
        self._write_files()
        self._make_cgroups()
        run_host(["ip", "addr", "add", f"{self.node_ip}/32", "dev", "lo"])
        start = time.monotonic()
        containerd = self._spawn(
            "containerd", "/usr/bin/containerd", ["--config", str(self.workdir / "containerd.toml")]
        )
        self._wait(containerd, "containerd to serve its CRI socket", lambda: self.ctr("version").returncode == 0)
        self.times.containerd = round(time.monotonic() - start, 1)
        self.sandbox.client.apply(
            {
                "apiVersion": kubernetes.RBAC_API,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "e2e:kube-apiserver-kubelet-client"},
                "roleRef": {
                    "apiGroup": kubernetes.RBAC_GROUP,
                    "kind": "ClusterRole",
                    "name": "system:kubelet-api-admin",
                },
                "subjects": [{"apiGroup": kubernetes.RBAC_GROUP, "kind": "User", "name": KUBELET_CLIENT_USER}],
            }
        )
        start = time.monotonic()
        kubelet = self._spawn(
            "kubelet",
            str(Builder(self.sandbox.versions).binary("kubelet")),
            [
                f"--config={self.workdir / 'kubelet.yaml'}",
                f"--kubeconfig={self.workdir / 'kubelet.kubeconfig'}",
                f"--root-dir={self._dir('kubelet')}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.node_ip}",
                "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())),
                "--v=2",
            ],
        )
        self._wait(kubelet, f"Node {self.name} to be Ready", self.ready, timeout=max(TIMEOUT, 120))
        self.times.kubelet_ready = round(time.monotonic() - start, 1)

    def _write_files(self) -> None:
        ca = self.sandbox.ca
        pki = self._dir("pki")
        ca.issue("kubelet-serving", self.name, hosts=(self.node_ip, self.name), directory=pki)
        client = ca.issue(
            "kubelet-client", f"system:node:{self.name}", organizations=("system:nodes",), client=True, directory=pki
        )
        self.sandbox.write_kubeconfig(self.workdir / "kubelet.kubeconfig", f"system:node:{self.name}", client)
        (self.workdir / "containerd.toml").write_text(self.containerd_config())
        for host, url in self.registry_hosts.items():
            (self._dir("containerd", "certs.d", host) / "hosts.toml").write_text(self.hosts_toml(url))
        (self._dir("cni", "net.d") / "10-e2e.conflist").write_text(json.dumps(self.cni_config(), indent=2) + "\n")
        (self.workdir / "kubelet.yaml").write_text(yaml.safe_dump(self.kubelet_config(), sort_keys=False))
        (self.workdir / "resolv.conf").write_text("# the e2e node's namespace has no DNS server\n")

    def _make_cgroups(self) -> None:
        """The kubelet refuses a cgroupRoot that does not exist; cpuset needs its cpus and mems filled in."""
        for controller in CGROUP_HIERARCHIES:
            path = CGROUP_FS / controller / self.cgroup_root.lstrip("/")
            path.mkdir(exist_ok=True)
            if controller == "cpuset":
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    (path / knob).write_text((path.parent / knob).read_text())

    def _spawn(self, name: str, binary: str, args: list[str]) -> Process:
        if name == "kubelet":
            version = self.sandbox.versions.kubernetes
        else:  # `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3`
            version = run_host([binary, "--version"]).stdout.split()[2]
        proc = spawn(name, version, Path(binary), args, self.workdir / "logs" / f"{name}.log", self.workdir)
        self.processes.append(proc)
        return proc

    def _wait(self, proc: Process, what: str, check: Any, timeout: float = TIMEOUT) -> None:
        wait_process(proc, what, check, timeout, NodeError)

    def ready(self) -> bool:
        try:
            node = self.sandbox.client.get("v1", "Node", self.name)
        except ApiError:
            return False
        conds = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    def advertise(self, resource: str, quantity: int) -> None:
        """Advertise an extended resource the documented way (a patch of the Node's ``status.capacity``,
        kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/); returns once the kubelet's next
        status update shows it allocatable. Nothing backs it: a pod gets the count, not a device."""
        self.sandbox.client.request(
            "PATCH",
            f"/api/v1/nodes/{self.name}/status",
            {"status": {"capacity": {resource: str(quantity)}}},
            content_type="application/merge-patch+json",
        )

        def allocatable() -> bool:
            node = self.sandbox.client.get("v1", "Node", self.name)
            return bool(node["status"].get("allocatable", {}).get(resource) == str(quantity))

        wait_for(f"{resource}: {quantity} allocatable on {self.name}", allocatable, 60)

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        """containerd's own CLI against this node's containerd, in the CRI namespace."""
        return run_host(["ctr", "--address", str(self.socket), "--namespace", CRI_NAMESPACE, *args], check=False)

    def tasks(self) -> list[str]:
        """Container tasks containerd runs (pod sandboxes included)."""
        proc = self.ctr("tasks", "ls", "-q")
        return proc.stdout.split() if proc.returncode == 0 else []

    # -- stop -----------------------------------------------------------------
    @uninterruptible
    def stop(self) -> None:
        """Pods, tasks, the kubelet, containerd and every trace of them; safe to call twice. Every step runs even
        when one before it failed; the first failure is raised at the end."""
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = False
        containerd_up = any(p.name == "containerd" and p.alive() for p in self.processes)
        kubelet_up = any(p.name == "kubelet" and p.alive() for p in self.processes)
        steps: list[Callable[[], None]] = [
            self._drain if kubelet_up else _nothing,
            lambda: self._terminate("kubelet"),
            self._remove_containers if containerd_up else _nothing,
            lambda: self._terminate("containerd"),
            self.processes.clear,
            self._kill_strays,
            self._unmount,
            self._remove_network,
            self._restore_rules,
            self._remove_cgroups,
            self._restore_host,
        ]
        errors: list[BaseException] = []
        for step in steps:
            try:
                step()
            except Exception as exc:  # the next steps still clean up
                errors.append(exc)
        if errors:
            raise NodeError(f"stopping the real node {self.name} failed: {errors}") from errors[0]

    def _terminate(self, name: str) -> None:
        for proc in self.processes:
            if proc.name == name:
                terminate(proc)

    def _unmount(self) -> None:
        for point in mounts_under(self.workdir, *self._new_netns()):
            run_host(["umount", "--lazy", point], check=False)
        for path in self._new_netns():
            path.unlink(missing_ok=True)
        # a sandbox the kubelet did not stop (it was removed above) never had its CNI DEL: drop its cached results
        for cached in self._cni_cache():
            cached.unlink()

    def _remove_network(self) -> None:
        if self.bridge in netns.devices():
            run_host(["ip", "link", "delete", self.bridge], check=False)
        run_host(["ip", "addr", "del", f"{self.node_ip}/32", "dev", "lo"], check=False)

    def _restore_host(self) -> None:
        """This node's container log links; then, when it is the last node running on the host, the kernel
        settings as they were and the folders containerd, the CNI plugins and the kubelet create at fixed places
        (empty once all is stopped: removed when they did not exist before, and nothing but folders is in them)."""
        for link in self._log_links():
            link.unlink(missing_ok=True)
        if self._snapshot is None or host_share.leave(self.holder) is None:
            return
        for path in self._new_host_paths():
            # a folder mounted over in this mount namespace (the sandbox daemon's tmpfs over /run/containerd, ...)
            # is its mounter's to remove: rmdir gives EBUSY (the sandbox's down, last after the install session's
            # node, whose snapshot had no such folder: 2026-11-28)
            if os.path.ismount(path):
                continue
            if not any(p.is_file() or p.is_symlink() for p in path.rglob("*")):
                shutil.rmtree(path)
        for key, value in self._snapshot.sysctls.items():
            (Path("/proc/sys") / key).write_text(value)

    def _new_host_paths(self) -> list[Path]:
        before = set(self._snapshot.host_paths) if self._snapshot else set(existing(HOST_PATHS))
        return [Path(p) for p in existing(HOST_PATHS) if p not in before]

    def _drain(self) -> None:
        """Cordon the node, delete its pods and let the kubelet stop them (their mounts and network go with them).
        Cordoned first: a platform still installed (a session stopped before its destroy) would have its
        Deployments' pods created and scheduled here again."""
        client = self.sandbox.client
        try:
            with contextlib.suppress(ApiError):  # a node never registered has no pods either
                cordon = {"spec": {"unschedulable": True}}
                node_path = client.path("v1", "Node", None, self.name)
                client.request("PATCH", node_path, cordon, content_type="application/merge-patch+json")
            pods = client.request("GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={self.name}"})[
                "items"
            ]
            for pod in pods:
                meta = pod["metadata"]
                client.request(
                    "DELETE",
                    client.path("v1", "Pod", meta["namespace"], meta["name"]),
                    {"gracePeriodSeconds": 0},
                )
            wait_for(
                f"the kubelet of {self.name} to stop its pods' containers and their networks",
                lambda: not self.tasks() and not self._new_netns(),
                60,
            )
        except (ApiError, TimeoutError) as exc:
            print(f"[node] drain of {self.name} incomplete, removing containers directly: {exc}", flush=True)

    def _remove_containers(self) -> None:
        """Whatever the kubelet left: kill and delete every task, then the containers and the pod sandboxes."""
        for task in self.tasks():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task)
        wait_for("containerd's tasks to stop", lambda: all(self._task_stopped(t) for t in self.tasks()), 30)
        for task in self.tasks():
            self.ctr("tasks", "delete", "--force", task)
        containers = self.ctr("containers", "ls", "-q").stdout.split()
        if containers:
            self.ctr("containers", "delete", *containers)

    def _task_stopped(self, task: str) -> bool:
        for line in self.ctr("tasks", "ls").stdout.splitlines()[1:]:
            parts = line.split()
            if parts and parts[0] == task:
                return parts[-1] == "STOPPED"
        return True

    def _kill_strays(self) -> None:
        """A shim outlives containerd by design; one still naming our work directory is ours to end (after a few
        seconds to finish on its own: under load a shim may still be exiting). Killed, it cannot remove its socket:
        that goes too (containerd 1.6 names it ``/run/containerd/s/<sha256 of address/namespace/id>``)."""
        strays = leftovers.processes_of(self.workdir)
        if strays:
            with contextlib.suppress(TimeoutError):
                wait_for("the shims to exit", lambda: not leftovers.processes_of(self.workdir), 10)
        for entry in leftovers.processes_of(self.workdir):
            pid, _, cmdline = entry.partition(": ")
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                continue
            args = cmdline.split()
            if "-id" in args and "-namespace" in args:
                shim_socket(self.socket, args[args.index("-namespace") + 1], args[args.index("-id") + 1]).unlink(
                    missing_ok=True
                )

    def _log_links(self) -> list[Path]:
        """The kubelet's links in /var/log/containers to this node's pod logs."""
        if not CONTAINER_LOG_LINKS.is_dir():
            return []
        logs = str(self.workdir / "pod-logs") + "/"
        return [p for p in sorted(CONTAINER_LOG_LINKS.iterdir()) if p.is_symlink() and os.readlink(p).startswith(logs)]

    def _cni_cache(self) -> list[Path]:
        """libcni's cached results of this node's pods, in the host's cache that every node shares: those of its
        network, and containerd's loopback (``cni-loopback-<sandbox id>-lo``) of the sandboxes its containerd still
        lists (containerd removes a sandbox's folder once the kubelet removed the sandbox, after its CNI DEL)."""
        if not CNI_CACHE.is_dir():
            return []
        folder = self.workdir / "containerd" / "root" / "io.containerd.grpc.v1.cri" / "sandboxes"
        ids = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
        return sorted(
            p
            for p in CNI_CACHE.iterdir()
            if p.name.startswith(f"{self.cni_network}-") or any(f"-{sandbox}-" in p.name for sandbox in ids)
        )

    def _new_netns(self) -> list[Path]:
        """The pods' network namespaces: containerd mounts them under its own state folder
        (``netns_mounts_under_state_dir``), not in the host's ``/var/run/netns`` that other nodes share."""
        return sorted((self.workdir / "containerd" / "state" / "io.containerd.grpc.v1.cri" / "netns").glob("cni-*"))

    def _restore_rules(self) -> None:
        """Drop the rules and chains the kubelet, the CNI plugins and the cluster network added (the namespace is
        ours alone): each changed table is saved, stripped of them and restored whole, so a rule whose comment
        holds quotes (kube-router's) goes as surely as any other."""
        before = set(self._snapshot.rules) if self._snapshot else set()
        for tool in ("iptables", "ip6tables"):
            kept, table, changed = [], "", False
            for line in run_host([f"{tool}-save"], check=False).stdout.splitlines():
                if line.startswith("*"):
                    table = line[1:]
                ours = line.startswith("-A") or (line.startswith(":") and not line.startswith(BUILTIN_CHAINS))
                if ours and f"{tool} {table}: {line}" not in before:
                    changed = True
                    continue
                kept.append(line)
            if changed:
                proc = subprocess.run(
                    [f"{tool}-restore"], input="\n".join(kept) + "\n", capture_output=True, text=True, check=False
                )
                if proc.returncode != 0:
                    raise NodeError(f"`{tool}-restore` of the rules before the node failed: {proc.stderr.strip()}")

    def _remove_cgroups(self) -> None:
        """rmdir the node's cgroup subtree bottom-up in every controller (empty once every task is gone)."""
        for controller in (*CGROUP_HIERARCHIES, "unified"):
            root = CGROUP_FS / controller / self.cgroup_root.lstrip("/")
            if not root.exists():
                continue
            for path in [*sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), root]:
                try:
                    path.rmdir()
                except OSError as exc:  # still has a task: ``leftovers`` reports it
                    print(f"[node] cannot remove cgroup {path}: {exc}", flush=True)

    # -- what is left ---------------------------------------------------------
    def leftovers(self) -> dict[str, list[str]]:
        """Everything of this node still present after ``stop``; empty lists when it cleaned up."""
        snap = self._snapshot or self.snapshot()
        cgroups = [
            str(CGROUP_FS / c / self.cgroup_root.lstrip("/"))
            for c in (*CGROUP_HIERARCHIES, "unified")
            if (CGROUP_FS / c / self.cgroup_root.lstrip("/")).exists()
        ]
        state = self.workdir / "containerd" / "state" / "io.containerd.runtime.v2.task" / CRI_NAMESPACE
        sysctls = {k: (Path("/proc/sys") / k).read_text().strip() for k in KUBELET_SYSCTLS}
        # another node running now holds the host-wide parts (host_share.py): they are its to restore
        alone = not host_share.others(self.holder)
        return {
            "processes": leftovers.processes_of(self.workdir),
            "mounts": mounts_under(self.workdir, *self._new_netns()),
            "network devices": sorted(set(netns.devices()) - set(snap.devices)),
            "iptables rules": sorted(set(iptables_rules()) - set(snap.rules)),
            "container tasks": sorted(p.name for p in state.glob("*")) if state.is_dir() else [],
            "shim sockets": sorted(set(shim_sockets()) - set(snap.shims) - set(foreign_shim_sockets(self.socket))),
            "pod network namespaces": [str(p) for p in self._new_netns()],
            "container log links": [str(p) for p in self._log_links()],
            "host folders": [str(p) for p in self._new_host_paths()] if alone else [],
            "CNI cache": [str(p) for p in self._cni_cache()],
            "cgroups": cgroups,
            "kernel settings": [f"{k}={v} (was {snap.sysctls[k]})" for k, v in sysctls.items() if v != snap.sysctls[k]]
            if alone
            else [],
        }


#: what ``NodeSandbox`` and the real node run
NODE_SANDBOX_BINARIES = ("etcd", *KUBE_COMMANDS, "kwok", "kubelet", "pause")


class NodeSandbox(Sandbox):
    """The control plane and kwok, without the platform's controllers: what the real node's own tests need."""

    def _start(self) -> None:
        self._start_control_plane()
        self._write_state()

    def _check_binaries(self) -> None:
        missing = [name for name in NODE_SANDBOX_BINARIES if not (self.bin_dir / name).exists()]
        if missing:
            raise BuildError(
                f"binaries {missing} are missing in {self.bin_dir}: run trainer-infra sandbox build --node"
            )


def _nothing() -> None:
    return None
