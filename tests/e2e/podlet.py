"""A kubelet for the charts' controller Pods: run the real binary of each Pod kwok pretends to run.

kwok schedules and "runs" every Pod without running anything. For the Pods of the JobSet, Kueue and Trainer
Deployments that Pulumi installed from the official charts, the podlet runs the real controller as the Pod
spec says — so the cluster is served by the configuration the *charts* rendered, not by harness-written files:

- the container's ``command``/``args`` and ``env`` (``fieldRef``s resolved), untouched;
- its volumes at their mount paths (ConfigMaps, Secrets, projected service-account tokens via TokenRequest,
  emptyDirs), kept in sync like the kubelet does (the controllers write their webhook certificates into the
  chart's Secret and wait until they appear in the mounted directory), inside a private mount namespace whose
  root is an overlay of the host's (``unshare -m``, root only), so hard-coded paths (``/visibility``,
  ``/controller_manager_config.yaml``) resolve as in the image;
- in-cluster credentials (``KUBERNETES_SERVICE_HOST``/``PORT`` + the token): the controller talks to the API
  server as its ServiceAccount, through the chart's RBAC.

The one deviation is the network: every process shares the host's. kwok gives a Pod an IP from its node's
``podCIDR``; the node that runs these Pods has a podCIDR the sandbox routes to this host (``ip route add
local``), and the listen addresses of the component Configuration (``:8081`` → ``<podIP>:8081``,
``webhook.host``) are bound to that IP, so each Pod has its own address as on a cluster. The API server
(``--enable-aggregator-routing``) dials Service endpoints, so webhooks and Kueue's visibility API are reached
through the chart's Services and EndpointSlices.
"""

from __future__ import annotations

import base64
import copy
import os
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kube import ApiError, KubeClient
from tests.e2e.sandbox import Process, _terminate, log_tail

Obj = dict[str, Any]

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
#: controller-runtime defaults of the listen addresses the podlet binds to the Pod's IP.
LISTEN_DEFAULTS = {("health", "healthProbeBindAddress"): ":8081", ("metrics", "bindAddress"): ":8443"}


@dataclass(frozen=True)
class Binary:
    """A built controller binary and the image it stands for (matched by the image's last path part)."""

    image_name: str
    path: Path
    version: str


def image_name_and_tag(image: str) -> tuple[str, str]:
    """``registry.k8s.io/jobset/jobset:v0.12.0`` → ``("jobset", "v0.12.0")`` (digests ignored)."""
    ref = image.split("@", 1)[0]
    name, _, tag = ref.rpartition(":")
    if "/" in tag or not name:
        name, tag = ref, ""
    return name.rsplit("/", 1)[-1], tag


def bind_listeners(config: Obj, pod_ip: str, *, visibility: bool = False) -> Obj:
    """A component Configuration whose listeners bind to the Pod's IP instead of every interface.

    ``"0"`` (disabled) stays disabled; a port-only or wildcard address gets the Pod's IP.
    """
    out = copy.deepcopy(config)
    for (section, key), default in LISTEN_DEFAULTS.items():
        value = str((out.get(section) or {}).get(key, default))
        if value == "0":
            continue
        port = value.rsplit(":", 1)[-1]
        out.setdefault(section, {})[key] = f"{pod_ip}:{port}"
    out.setdefault("webhook", {})["host"] = pod_ip
    if visibility:
        out.setdefault("visibilityServer", {})["bindAddress"] = pod_ip
    return out


def localize_config_file(text: str, pod_ip: str) -> str:
    """Bind the listeners of a ``kind: Configuration`` document (Kueue's also its visibility server)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if not isinstance(doc, dict) or doc.get("kind") != "Configuration":
        return text
    visibility = str(doc.get("apiVersion", "")).startswith("config.kueue.x-k8s.io/")
    return yaml.safe_dump(bind_listeners(doc, pod_ip, visibility=visibility), sort_keys=False)


def _field(obj: Obj, path: str) -> str:
    """``metadata.namespace``, ``status.podIP``, ``metadata.labels['x']`` of a Pod."""
    if "[" in path:
        base, _, key = path.partition("[")
        value: Any = obj
        for part in base.split("."):
            value = value.get(part, {})
        return str(value.get(key.strip("]'\""), ""))
    value = obj
    for part in path.split("."):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


@dataclass
class RunningPod:
    """One Pod's process and the host directories that stand for its volumes."""

    uid: str
    namespace: str
    name: str
    ip: str
    root: Path
    process: Process
    volumes: dict[str, Path] = field(default_factory=dict)
    restarts: int = 0


class Podlet:
    """Watches Pods bound to ``node`` and runs those whose image names a built controller."""

    def __init__(
        self,
        client: KubeClient,
        *,
        node: str,
        binaries: list[Binary],
        workdir: Path,
        server: str,
        ca_cert: Path,
        interval: float = 1.0,
    ) -> None:
        self.client = client
        self.node = node
        self.binaries = {b.image_name: b for b in binaries}
        self.workdir = workdir
        self.server = server
        self.ca_cert = ca_cert
        self.interval = interval
        self.pods: dict[str, RunningPod] = {}
        #: what happened, for failure messages: "started kueue-system/kueue-controller-manager-x at 10.251.90.3"
        self.events: list[str] = []
        self.skipped: dict[str, str] = {}
        self.waiting: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="podlet", daemon=True)
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> Podlet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        with self._lock:
            for pod in list(self.pods.values()):
                self._kill(pod)
            self.pods.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except Exception as exc:
                self.events.append(f"sync failed: {exc!r}")
            self._stop.wait(self.interval)

    # -- one pass ----------------------------------------------------------------
    def sync(self) -> None:
        """Start new Pods, refresh volumes of running ones, stop Pods that went away, restart crashed ones."""
        answer = self.client.request("GET", "/api/v1/pods", params={"fieldSelector": f"spec.nodeName={self.node}"})
        pods: list[Obj] = answer.get("items", [])
        seen: set[str] = set()
        with self._lock:
            for pod in pods:
                uid = pod["metadata"]["uid"]
                ip = pod.get("status", {}).get("podIP")
                if pod["metadata"].get("deletionTimestamp") or not ip:
                    continue
                seen.add(uid)
                running = self.pods.get(uid)
                if running is None:
                    if uid not in self.skipped:
                        self._start(pod)
                    continue
                self._sync_volumes(pod, running)
                if not running.process.alive():
                    self.events.append(
                        running.process.describe_failure(f"{running.namespace}/{running.name} exited; restarting")
                    )
                    running.restarts += 1
                    running.process = self._spawn(pod, running)
            for uid in [u for u in self.pods if u not in seen]:
                pod_gone = self.pods.pop(uid)
                self._kill(pod_gone)
                self.events.append(f"stopped {pod_gone.namespace}/{pod_gone.name} (Pod deleted)")

    def _container(self, pod: Obj) -> tuple[Obj, Binary] | None:
        for container in pod["spec"].get("containers", []):
            name, tag = image_name_and_tag(container.get("image", ""))
            binary = self.binaries.get(name)
            if binary is None:
                continue
            if tag and tag.removeprefix("v") != binary.version:
                self.skipped[pod["metadata"]["uid"]] = (
                    f"{container['image']}: the sandbox built {binary.image_name} v{binary.version}"
                )
                return None
            return container, binary
        return None

    def _start(self, pod: Obj) -> None:
        meta = pod["metadata"]
        found = self._container(pod)
        if found is None:
            self.skipped.setdefault(meta["uid"], "no built binary for its images (kwok only)")
            return
        root = self.workdir / f"{meta['namespace']}_{meta['name']}"
        shutil.rmtree(root, ignore_errors=True)
        (root / "volumes").mkdir(parents=True)
        running = RunningPod(meta["uid"], meta["namespace"], meta["name"], pod["status"]["podIP"], root, None)  # type: ignore[arg-type]
        self._sync_volumes(pod, running)
        sourced = {v["name"] for v in pod["spec"].get("volumes", []) if "configMap" in v or "secret" in v}
        mounted = {m["name"] for m in found[0].get("volumeMounts", [])}
        missing = sorted((sourced & mounted) - set(running.volumes))
        if missing:
            # as the kubelet: the container waits (ContainerCreating) until every volume it mounts can be made
            self.waiting[meta["uid"]] = f"{meta['namespace']}/{meta['name']} waits for volumes {missing}"
            return
        self.waiting.pop(meta["uid"], None)
        running.process = self._spawn(pod, running)
        self.pods[meta["uid"]] = running
        self.events.append(f"started {running.namespace}/{running.name} at {running.ip} ({found[1].path.name})")

    # -- volumes -------------------------------------------------------------------
    def _sync_volumes(self, pod: Obj, running: RunningPod) -> None:
        """Write every volume's files as the kubelet would project them (atomically, only when changed)."""
        for volume in pod["spec"].get("volumes", []):
            files = self._volume_files(pod, volume)
            if files is None:
                continue
            directory = running.root / "volumes" / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            running.volumes[volume["name"]] = directory
            for name, data in files.items():
                target = directory / name
                if target.exists() and target.read_bytes() == data:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.tmp")
                tmp.write_bytes(data)
                tmp.replace(target)

    def _volume_files(self, pod: Obj, volume: Obj) -> dict[str, bytes] | None:
        ns = pod["metadata"]["namespace"]
        if "configMap" in volume:
            return self._config_map(ns, volume["configMap"], pod)
        if "secret" in volume:
            return self._secret(ns, volume["secret"])
        if "emptyDir" in volume:
            return {}
        if "projected" in volume:
            files: dict[str, bytes] = {}
            for source in volume["projected"].get("sources", []):
                if "serviceAccountToken" in source:
                    files[source["serviceAccountToken"].get("path", "token")] = self._token(pod, source)
                elif "configMap" in source:
                    files.update(self._config_map(ns, source["configMap"], pod) or {})
                elif "secret" in source:
                    files.update(self._secret(ns, source["secret"]) or {})
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items", []):
                        files[item["path"]] = _field(pod, item["fieldRef"]["fieldPath"]).encode()
            return files
        return None

    def _items(self, data: dict[str, bytes], spec: Obj) -> dict[str, bytes]:
        items = spec.get("items")
        if not items:
            return data
        return {item["path"]: data[item["key"]] for item in items if item["key"] in data}

    def _config_map(self, ns: str, spec: Obj, pod: Obj) -> dict[str, bytes] | None:
        try:
            obj = self.client.get("v1", "ConfigMap", spec["name"], ns)
        except ApiError:
            return None if not spec.get("optional") else {}
        ip = pod["status"]["podIP"]
        data = {k: localize_config_file(v, ip).encode() for k, v in (obj.get("data") or {}).items()}
        return self._items(data, spec)

    def _secret(self, ns: str, spec: Obj) -> dict[str, bytes] | None:
        try:
            obj = self.client.get("v1", "Secret", spec["secretName"], ns)
        except ApiError:
            return None if not spec.get("optional") else {}
        data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        return self._items(data, spec)

    def _token(self, pod: Obj, source: Obj) -> bytes:
        meta = pod["metadata"]
        sa = pod["spec"].get("serviceAccountName") or "default"
        body: Obj = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [source["serviceAccountToken"]["audience"]]
                if source["serviceAccountToken"].get("audience")
                else None,
                "expirationSeconds": 3600 * 24,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        if body["spec"]["audiences"] is None:
            del body["spec"]["audiences"]
        path = f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token"
        # one token per pod for its life (the kubelet refreshes at 80% of a 1 h default; a day is enough here)
        cached = self.workdir / f".token-{meta['uid']}"
        if cached.exists():
            return cached.read_bytes()
        token = str(self.client.request("POST", path, body)["status"]["token"]).encode()
        cached.write_bytes(token)
        return token

    # -- processes -------------------------------------------------------------------
    def _spawn(self, pod: Obj, running: RunningPod) -> Process:
        found = self._container(pod)
        assert found is not None
        container, binary = found
        mounts: list[tuple[Path, str]] = []
        for mount in container.get("volumeMounts", []):
            source = running.volumes.get(mount["name"])
            if source is None:
                continue
            if mount.get("subPath"):
                source = source / mount["subPath"]
            mounts.append((source, mount["mountPath"]))
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "HOSTNAME": pod["metadata"]["name"],
            "KUBERNETES_SERVICE_HOST": self.server.removeprefix("https://").rsplit(":", 1)[0],
            "KUBERNETES_SERVICE_PORT": self.server.rsplit(":", 1)[1],
        }
        for var in container.get("env", []):
            if "value" in var:
                env[var["name"]] = str(var["value"])
            elif "fieldRef" in var.get("valueFrom", {}):
                env[var["name"]] = _field(pod, var["valueFrom"]["fieldRef"]["fieldPath"])
        argv = [*container.get("command", [])[1:], *container.get("args", [])]
        script = mount_script(running.root / "rootfs", running.root / "volumes", mounts, str(binary.path), argv)
        log = running.root / "container.log"
        with log.open("ab") as fh:
            popen = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "/bin/sh", "-ec", script],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        return Process(f"{running.namespace}/{running.name}", binary.version, binary.path, log, popen, popen.pid)

    def _kill(self, pod: RunningPod) -> None:
        _terminate(pod.process, grace=10)

    def describe(self) -> str:
        """State for failure messages: events, skipped Pods and each process's log tail."""
        lines = [*self.events[-20:]]
        lines += [f"not run: {uid}: {why}" for uid, why in self.skipped.items()]
        lines += [f"not started yet: {why}" for why in self.waiting.values()]
        for pod in self.pods.values():
            lines.append(f"--- {pod.namespace}/{pod.name} at {pod.ip}:\n{log_tail(pod.process.log, 15)}")
        return "\n".join(lines)


def mount_script(root: Path, volumes: Path, mounts: list[tuple[Path, str]], binary: str, argv: list[str]) -> str:
    """Shell run by ``unshare -m``: overlay the host root, bind the Pod's volumes, exec the binary in it.

    The volume mounts are made inside the chroot so that paths resolve against the Pod's root (``/var/run`` is
    a symlink to ``/run``); their sources are reached through ``/.podlet-volumes``, a bind of the host folder
    the podlet keeps in sync (so Secret updates show, as with the kubelet).
    """
    upper, work, merged = root / "upper", root / "work", root / "merged"
    outer = [
        f"mkdir -p {upper} {work} {merged}",
        f"mount -t overlay overlay -o lowerdir=/,upperdir={upper},workdir={work} {merged}",
        *(f"mount --rbind /{d} {merged}/{d}" for d in ("proc", "sys", "dev")),
        f"mkdir -p {merged}/.podlet-volumes",
        f"mount --bind {shlex.quote(str(volumes))} {merged}/.podlet-volumes",
    ]
    inner = []
    for source, target in mounts:
        inside = "/.podlet-volumes/" + str(source.relative_to(volumes))
        if source.is_dir():
            inner.append(f"mkdir -p {shlex.quote(target)}")
        else:
            inner.append(f"mkdir -p {shlex.quote(os.path.dirname(target))} && touch {shlex.quote(target)}")
        inner.append(f"mount --bind {shlex.quote(inside)} {shlex.quote(target)}")
    inner.append(f"exec {shlex.join([binary, *argv])}")
    outer.append(f"exec chroot {merged} /bin/sh -ec {shlex.quote(chr(10).join(inner))}")
    return "\n".join(outer)
