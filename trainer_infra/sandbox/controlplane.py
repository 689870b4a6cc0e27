"""A container-free Kubernetes + Trainer/JobSet/Kueue sandbox made of plain processes on loopback.

Used by `trainer-infra simulate` and the e2e tests (``python -m tests.e2e.sandbox up|down|status``).

Order (each step waits, with a timeout naming what did not happen):
etcd → kube-apiserver → kube-controller-manager, kube-scheduler, kwok →
pinned CRDs (Established) → the charts' RBAC (given the render's Helm releases) → JobSet, Kueue, Trainer and
LeaderWorkerSet controllers (webhooks on 127.0.0.1 with our CA), each with the identity its chart gives it →
upstream webhook configurations rewritten to those URLs.
Every process started is stopped on error, on context exit and at interpreter
exit; ``up`` detaches and records the PIDs so ``down`` can stop them later.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from trainer_infra.manifests.runtime import minimal_runtime
from trainer_infra.nodepools.kwok import KWOK_ANNOTATION, KWOK_MANAGED_NODES
from trainer_infra.sandbox.apply import apply_objects
from trainer_infra.sandbox.charts import ChartIdentities, chart_identities
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.kube import ApiError, FatalWaitError, KubeClient, wait_for
from trainer_infra.sandbox.pki import CertificateAuthority, CertPair, service_account_keypair
from trainer_infra.sandbox.versions import (
    VersionSet,
    binary_dir,
    check_binaries,
    module_dir,
    monitoring_crd_files,
    shared_dir,
)
from trainer_infra.sandbox.webhooks import MANAGED_BY, load_kustomized_webhooks, load_upstream_webhooks, localize

Obj = dict[str, Any]

SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
#: Kueue ignores --config paths for its metrics certificate (cmd/kueue/main.go).
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
#: Kueue frameworks the platform uses; the others stay off so their webhooks are no-ops.
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
TIMEOUT = float(os.environ.get("E2E_TIMEOUT", "90"))
#: the API server's user towards kubelets (kubeadm's name)
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
#: the aggregation layer's client (kubeadm's name): the only identity whose X-Remote-* headers extension servers trust
FRONT_PROXY_CLIENT = "front-proxy-client"


class SandboxError(RuntimeError):
    """A sandbox step failed; the message names the process, its version and its log tail."""


def ephemeral_port_range(proc_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range for port-0 binds and outgoing connections (Linux default if unreadable)."""
    try:
        low, high = (int(x) for x in proc_file.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def port_window(ephemeral: tuple[int, int]) -> range:
    """The widest stretch of unprivileged ports the kernel never hands out on its own."""
    low, high = ephemeral
    below, above = range(max(1024, min(low, 10000)), low), range(high + 1, 65536)
    return max(below, above, key=len)


_handed_out: set[int] = set()
_port_lock = threading.Lock()


def free_port() -> int:
    """A free TCP port on 127.0.0.1 that stays free until the process we configure with it binds it.

    A port-0 probe returns an ephemeral port, and before the controller binds it the kernel may give the same
    port to an outgoing connection (kube-apiserver → etcd) or to another port-0 listener: the controller then
    dies with "address already in use" and takes the whole session down (seen on a cold CI run). Ports
    outside the ephemeral range are only taken by explicit binds; each is handed out once per test process,
    and a random pick keeps two sessions on one machine apart.
    """
    window = port_window(ephemeral_port_range())
    pick = random.SystemRandom()
    with _port_lock:
        for _ in range(200):
            port = pick.choice(window)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise SandboxError(f"no free TCP port on 127.0.0.1 in {window.start}-{window.stop - 1} after 200 tries")


def log_tail(path: Path, lines: int = 30) -> str:
    """Last lines of a log file (for error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Process:
    """One running binary of the sandbox."""

    name: str
    version: str
    binary: Path
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0

    def alive(self) -> bool:
        """True while the process runs (works for detached processes too)."""
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_matches(self.pid, self.binary)

    def describe_failure(self, what: str) -> str:
        """Message naming the binary, its version and the tail of its log."""
        code = self.popen.poll() if self.popen is not None else None
        state = f"exited with code {code}" if code is not None else "is running"
        return (
            f"{what}: {self.name} (v{self.version}, {self.binary}) {state}; "
            f"last lines of {self.log}:\n{log_tail(self.log)}"
        )


def spawn(
    name: str, version: str, binary: Path, args: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
) -> Process:
    """Start ``binary`` in its own session (Ctrl-C in a terminal does not reach it before we stop it in order),
    appending its output to ``log``."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("GOFLAGS", None)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        popen = subprocess.Popen(
            [str(binary), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    return Process(name, version, binary, log, popen, popen.pid)


def wait_process(
    proc: Process, what: str, check: Any, timeout: float = TIMEOUT, error: type[SandboxError] = SandboxError
) -> Any:
    """Wait for ``check``; fail fast with the log tail if the process died meanwhile."""

    def guarded() -> Any:
        if not proc.alive():
            raise _ProcessDiedError(proc.describe_failure(f"{what} never happened"))
        return check()

    try:
        return wait_for(f"{what} ({proc.name} v{proc.version})", guarded, timeout)
    except _ProcessDiedError as died:
        raise error(str(died)) from None
    except TimeoutError as exc:
        raise error(f"{exc}\n{proc.describe_failure('still waiting')}") from None


def pid_matches(pid: int, binary: Path) -> bool:
    """Whether ``pid`` is still our binary (guards against PID reuse before a kill)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return exe.removesuffix(" (deleted)") == str(binary)


@dataclass
class Endpoints:
    """Ports chosen for this sandbox."""

    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)
    kwok: int = field(default_factory=free_port)
    jobset_webhook: int = field(default_factory=free_port)
    jobset_health: int = field(default_factory=free_port)
    kueue_webhook: int = field(default_factory=free_port)
    kueue_health: int = field(default_factory=free_port)
    trainer_webhook: int = field(default_factory=free_port)
    trainer_health: int = field(default_factory=free_port)
    lws_webhook: int = field(default_factory=free_port)
    lws_health: int = field(default_factory=free_port)
    jobset_metrics: int = field(default_factory=free_port)
    kueue_metrics: int = field(default_factory=free_port)
    trainer_metrics: int = field(default_factory=free_port)


class Sandbox:
    """Start, inspect and stop the whole local control plane."""

    #: extra kube-apiserver flags of a variant (``ChartSandbox`` routes to Service endpoints)
    apiserver_args: tuple[str, ...] = ()

    def __init__(
        self,
        workdir: Path,
        versions: VersionSet | None = None,
        *,
        bin_dir: Path | None = None,
        shared: Path | None = None,
        kueue_settings: dict[str, Any] | None = None,
        controller_users: dict[str, str] | None = None,
        helm_releases: Sequence[Obj] | None = None,
        trainer_controller: bool = True,
    ) -> None:
        self.workdir = workdir.resolve()
        #: The render's Helm releases: the charts' RBAC is installed and each controller runs as its chart's
        #: ServiceAccount with only what the charts grant it (``charts.py``); a controller the charts do not
        #: install does not run (LeaderWorkerSet without the Trainer data cache).
        self.helm_releases = list(helm_releases) if helm_releases is not None else None
        #: Without releases: component → the username its controller has on a real cluster
        #: (``render.controller_users``), in ``system:masters`` (the real node's session only).
        self.controller_users = dict(controller_users or {})
        self._charts: Future[ChartIdentities] | None = None
        #: component → the client certificate its controller runs with (not the admin's)
        self.controller_certs: dict[str, CertPair] = {}
        #: False: Trainer CRDs only, no controller and no Trainer webhooks (a fleet manager on Trainer < 2.3).
        self.trainer_controller = trainer_controller
        #: Scheduling settings of the stack's Kueue (``render.kueue_settings``) laid over the sandbox's config.
        self.kueue_settings = dict(kueue_settings or {})
        self.versions = versions or VersionSet.from_env()
        self.bin_dir = bin_dir or binary_dir(self.versions)
        self.shared = shared or shared_dir()
        self.ports = Endpoints()
        self.processes: list[Process] = []
        self.kubeconfig = self.workdir / "kubeconfig"
        self.state_file = self.workdir / "state.json"
        self._created_kueue_metrics_certs = False
        self._client: KubeClient | None = None
        self._atexit_registered = False

    # -- public API ---------------------------------------------------------
    @property
    def server(self) -> str:
        """The API server URL."""
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def client(self) -> KubeClient:
        """Admin (system:masters) client."""
        if self._client is None:
            raise SandboxError("sandbox not started")
        return self._client

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Bring everything up; on any failure stop what was started and re-raise."""
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
            _exit_on_sigterm()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    @uninterruptible
    def stop(self) -> None:
        """Stop every process started (reverse order), then remove files we created outside workdir."""
        for proc in reversed(self.processes):
            _terminate(proc)
        self.processes.clear()
        if self._created_kueue_metrics_certs:
            shutil.rmtree(KUEUE_METRICS_CERT_DIR.parent.parent, ignore_errors=True)
            self._created_kueue_metrics_certs = False
        if self.state_file.exists():
            self.state_file.unlink()

    def detach(self) -> None:
        """Leave processes running after this Python process exits (for ``up``)."""
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    # -- steps --------------------------------------------------------------
    def _start(self) -> None:
        if self.helm_releases is not None:
            # rendered while the control plane starts: Kueue's chart takes a few seconds
            pool = ThreadPoolExecutor(max_workers=1)
            self._charts = pool.submit(
                chart_identities,
                self.helm_releases,
                self.bin_dir / "chart-render",
                self.shared,
                self.versions.kubernetes,
            )
            pool.shutdown(wait=False)
        self._start_control_plane()
        self._apply_crds()
        self._start_platform_controllers()
        self._register_webhooks()
        self._write_state()

    def _start_control_plane(self) -> None:
        """A fresh work folder, PKI, etcd, the API server, controller-manager and scheduler."""
        self._check_binaries()
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        for sub in ("logs", "pki", "etcd", "config"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self._make_pki()
        self._start_etcd()
        self._start_apiserver()
        self._start_core_controllers()

    def _check_binaries(self) -> None:
        check_binaries(self.versions, self.bin_dir)

    def _make_pki(self) -> None:
        pki = self.workdir / "pki"
        self.ca = CertificateAuthority(pki)
        self.apiserver_cert = self.ca.issue(
            "apiserver",
            "kube-apiserver",
            hosts=(
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
                "10.96.0.1",
            ),
        )
        self.admin_cert = self.ca.issue(
            "admin", "trainer-platform-e2e-admin", organizations=("system:masters",), client=True
        )
        self.sa_keys = service_account_keypair(pki)
        self.webhook_cert = self.ca.issue("webhook", "webhook", hosts=("127.0.0.1", "localhost"))
        # what the API server shows a real node's kubelet (logs, exec; node.py binds it to system:kubelet-api-admin)
        self.kubelet_client_cert = self.ca.issue("apiserver-kubelet-client", KUBELET_CLIENT_USER, client=True)
        # the aggregation layer, as kubeadm sets it up: the API server proxies aggregated APIs (Kueue's
        # visibility API) with this client certificate and the caller in X-Remote-* headers; the extension
        # server trusts those headers only from a certificate of this separate CA with this name. Without
        # it the extension server sees every proxied request as anonymous and the APIService stays 503.
        front_proxy_ca = CertificateAuthority(pki / "front-proxy", "trainer-platform-e2e-front-proxy-ca")
        self.front_proxy_ca_path = front_proxy_ca.cert_path
        self.front_proxy_client = front_proxy_ca.issue("front-proxy-client", FRONT_PROXY_CLIENT, client=True)

    def _spawn(
        self, name: str, version: str, binary: str, args: list[str], env: dict[str, str] | None = None
    ) -> Process:
        """Start a binary in its own session, logging to logs/<name>.log."""
        env = {"KUBECONFIG": str(self.kubeconfig), **(env or {})}
        proc = spawn(
            name, version, self.bin_dir / binary, args, self.workdir / "logs" / f"{name}.log", self.workdir, env
        )
        self.processes.append(proc)
        return proc

    def _wait(self, proc: Process, what: str, check: Any, timeout: float = TIMEOUT) -> Any:
        return wait_process(proc, what, check, timeout)

    def _start_etcd(self) -> None:
        p = self.ports
        proc = self._spawn(
            "etcd",
            self.versions.etcd,
            "etcd",
            [
                "--name=e2e",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--advertise-client-urls=http://127.0.0.1:{p.etcd_client}",
                f"--listen-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p.etcd_peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{p.etcd_peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )

        def healthy() -> bool:
            with urllib.request.urlopen(f"http://127.0.0.1:{p.etcd_client}/health", timeout=2) as r:
                return bool(json.load(r).get("health") == "true")

        self._wait(proc, "etcd /health to report true", healthy)

    def _start_apiserver(self) -> None:
        p = self.ports
        pki = self.workdir / "pki"
        proc = self._spawn(
            "kube-apiserver",
            self.versions.kubernetes,
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{p.etcd_client}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={self.apiserver_cert.cert}",
                f"--tls-private-key-file={self.apiserver_cert.key}",
                f"--client-ca-file={self.ca.cert_path}",
                f"--secure-port={p.apiserver}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # Node: a real node's kubelet (node.py) gets what its own pods need, as on kubeadm clusters
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={self.kubelet_client_cert.cert}",
                f"--kubelet-client-key={self.kubelet_client_cert.key}",
                f"--kubelet-certificate-authority={self.ca.cert_path}",
                f"--requestheader-client-ca-file={self.front_proxy_ca_path}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={self.front_proxy_client.cert}",
                f"--proxy-client-key-file={self.front_proxy_client.key}",
                "--kubelet-preferred-address-types=InternalIP",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={self.sa_keys.cert}",
                f"--service-account-signing-key-file={self.sa_keys.key}",
                "--profiling=false",
                "--v=1",
                *self.apiserver_args,
            ],
        )
        self.write_kubeconfig(self.kubeconfig, "admin", self.admin_cert)
        self._client = KubeClient(self.server, self.ca.cert_path, self.admin_cert.cert, self.admin_cert.key)

        def ready() -> bool:
            return self.client.request("GET", "/readyz", timeout=5) is not None

        self._wait(proc, "kube-apiserver /readyz", ready, timeout=max(TIMEOUT, 120))

    def write_kubeconfig(self, path: Path, user: str, cert: CertPair) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "e2e", "cluster": {"server": self.server, "certificate-authority": str(self.ca.cert_path)}}
            ],
            "users": [{"name": user, "user": {"client-certificate": str(cert.cert), "client-key": str(cert.key)}}],
            "contexts": [{"name": f"{user}@e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": f"{user}@e2e",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig with a client certificate for ``user`` in ``groups`` (a team member).

        A real credential, not impersonation: the SDK and kubectl need nothing special.
        """
        pair = self._user_cert(user, groups)
        path = self.workdir / f"kubeconfig-{user}"
        self.write_kubeconfig(path, user, pair)
        return path

    def user_client(self, user: str, groups: tuple[str, ...] = ()) -> KubeClient:
        """A REST client authenticated as ``user`` in ``groups``."""
        pair = self._user_cert(user, groups)
        return KubeClient(self.server, self.ca.cert_path, pair.cert, pair.key)

    def _user_cert(self, user: str, groups: tuple[str, ...]) -> CertPair:
        name = f"user-{user}"
        cert, key = self.workdir / "pki" / f"{name}.crt", self.workdir / "pki" / f"{name}.key"
        if cert.exists() and key.exists():
            return CertPair(cert, key)
        return self.ca.issue(name, user, organizations=groups, client=True)

    def _start_core_controllers(self) -> None:
        p = self.ports
        v = self.versions.kubernetes
        kcm = self._spawn(
            "kube-controller-manager",
            v,
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                f"--service-account-private-key-file={self.sa_keys.key}",
                f"--root-ca-file={self.ca.cert_path}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
                # its default, /usr/libexec/kubernetes/…, would be created on the host at every start
                f"--flex-volume-plugin-dir={self.workdir / 'flexvolume'}",
                "--v=1",
            ],
        )
        sched = self._spawn(
            "kube-scheduler",
            v,
            "kube-scheduler",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={p.scheduler}",
                "--v=1",
            ],
        )
        kwok_config = self.workdir / "config" / "kwok.yaml"
        kwok_config.write_text(yaml.safe_dump_all(kwok_stages(self.versions.kwok), sort_keys=False))
        kwok = self._spawn(
            "kwok",
            self.versions.kwok,
            "kwok",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--config={kwok_config}",
                *KWOK_MANAGED_NODES,
                f"--cidr={POD_CIDR}",
                "--node-ip=10.250.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{p.kwok}",
            ],
        )
        self._wait(
            kcm,
            "the default ServiceAccount (created by kube-controller-manager)",
            lambda: self.client.get("v1", "ServiceAccount", "default", "default"),
        )
        self._wait(sched, "kube-scheduler /healthz", lambda: _https_ok(f"https://127.0.0.1:{p.scheduler}/healthz"))
        self._wait(kwok, "kwok /healthz", lambda: _http_ok(f"http://127.0.0.1:{p.kwok}/healthz"))

    # -- CRDs -----------------------------------------------------------------
    def crd_files(self) -> list[Path]:
        """Pinned CRD files for this version set, from the shared folder."""
        v = self.versions
        folders = [
            self.shared / "crds" / "jobset" / f"v{v.jobset}",
            self.shared / "crds" / "kueue" / f"v{v.kueue}",
            self.shared / "crds" / "trainer" / f"v{v.trainer}",
        ]
        files: list[Path] = []
        for folder in folders:
            found = sorted(folder.glob("*.yaml"))
            if not found:
                raise SandboxError(f"no CRDs in {folder} (set TRAINER_PLATFORM_SHARED to the shared folder)")
            files.extend(found)
        lws_crds = sorted((self.lws_module() / "config" / "crd" / "bases").glob("*.yaml"))
        if not lws_crds:
            raise SandboxError(f"no CRDs in sigs.k8s.io/lws v{self.versions.lws} config/crd/bases")
        return [*files, *monitoring_crd_files(v.prometheus_operator), *lws_crds]

    def lws_module(self) -> Path:
        """LeaderWorkerSet's module at the pinned version: its CRD and webhook manifests are read from
        there (the shared folder has none: LWS only comes with the Trainer chart's data cache)."""
        return module_dir("sigs.k8s.io/lws", self.versions.lws)

    def _apply_crds(self) -> None:
        self.apply_crds(self.crd_files())

    def apply_crds(self, files: list[Path]) -> None:
        """Server-side apply the CRDs of ``files`` and wait until each is Established."""
        names = []
        for path in files:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    self.client.apply(doc)
                    names.append(doc["metadata"]["name"])

        def established() -> bool | list[str]:
            pending = [
                n
                for n in names
                if not _condition(
                    self.client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", n), "Established"
                )
            ]
            return not pending or False

        wait_for(f"CRDs {names} to be Established", established, TIMEOUT)

    # -- platform controllers ---------------------------------------------------
    def _install_chart_rbac(self) -> None:
        """The charts' RBAC objects, before any controller starts (the Namespaces exist)."""
        if self._charts is None:
            return
        charts = self._charts.result()
        apply_objects(self.client, charts.rbac, field_manager="trainer-platform-charts")
        self.controller_users = dict(charts.users)

    def runs(self, component: str) -> bool:
        """Whether the sandbox runs ``component``'s controller (the charts install it, or no charts given)."""
        if component == "trainer" and not self.trainer_controller:
            return False
        return self._charts is None or component in self.controller_users

    def _controller_kubeconfig(self, component: str) -> Path:
        """One for the controller's real-cluster username (a ServiceAccount), with the groups a ServiceAccount
        token carries; the admin kubeconfig for a sandbox without a render.

        With the charts' RBAC installed that identity has exactly what the charts grant; without it (a legacy
        caller passing only ``controller_users``) the certificate also carries ``system:masters``.
        """
        user = self.controller_users.get(component)
        if user is None:
            return self.kubeconfig
        groups = [] if self._charts is not None else ["system:masters"]
        if user.startswith("system:serviceaccount:"):
            groups += ["system:serviceaccounts", f"system:serviceaccounts:{user.split(':')[2]}"]
        pair = self.ca.issue(f"controller-{component}", user, organizations=tuple(groups), client=True)
        self.controller_certs[component] = pair
        path = self.workdir / f"kubeconfig-controller-{component}"
        self.write_kubeconfig(path, component, pair)
        return path

    def controller_client(self, component: str) -> KubeClient:
        """A client with the credential ``component``'s controller runs with (a started, non-admin one)."""
        pair = self.controller_certs[component]
        return KubeClient(self.server, self.ca.cert_path, pair.cert, pair.key)

    def _start_platform_controllers(self) -> None:
        for ns in ("jobset-system", "kueue-system", "kubeflow-system"):
            self.client.apply(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": dict(MANAGED_BY)}}
            )
        self._install_chart_rbac()
        cfg_dir = self.workdir / "config"
        p = self.ports
        v = self.versions

        jobset_cfg = self._controller_config(
            "jobset",
            "config.jobset.x-k8s.io/v1alpha1",
            p.jobset_webhook,
            p.jobset_health,
            f"127.0.0.1:{p.jobset_metrics}",
        )
        jobset = self._spawn(
            "jobset-manager",
            v.jobset,
            "jobset-manager",
            [
                f"--config={jobset_cfg}",
                f"--kubeconfig={self._controller_kubeconfig('jobset')}",
                "--zap-log-level=info",
            ],
        )

        kueue_certs = self.workdir / "certs" / "kueue"
        self._webhook_certs(kueue_certs)
        self._ensure_kueue_metrics_certs()
        kueue_cfg = cfg_dir / "kueue.yaml"
        kueue_cfg.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                    "kind": "Configuration",
                    "namespace": "kueue-system",
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "webhook": {"port": p.kueue_webhook, "host": "127.0.0.1", "certDir": str(kueue_certs)},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{p.kueue_health}"},
                    "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
                    **self.kueue_settings,
                    # the render's metric settings (enableClusterQueueResources), served here
                    "metrics": {
                        **self.kueue_settings.get("metrics", {}),
                        "bindAddress": f"127.0.0.1:{p.kueue_metrics}",
                    },
                    # VisibilityOnDemand serves from a fixed /visibility cert dir: off in the sandbox.
                    "featureGates": {**self.kueue_settings.get("featureGates", {}), "VisibilityOnDemand": False},
                }
            )
        )
        kueue = self._spawn(
            "kueue-manager",
            v.kueue,
            "kueue-manager",
            [
                f"--config={kueue_cfg}",
                f"--kubeconfig={self._controller_kubeconfig('kueue')}",
                "--zap-log-level=info",
            ],
        )

        trainer_tmp = self.workdir / "trainer-tmp"
        self._webhook_certs(trainer_tmp / "k8s-webhook-server" / "serving-certs")
        trainer_cfg = cfg_dir / "trainer.yaml"
        trainer_cfg.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                    "kind": "Configuration",
                    "leaderElection": {"leaderElect": False},
                    "certManagement": {"enable": False},
                    "webhook": {"port": p.trainer_webhook, "host": "127.0.0.1"},
                    "metrics": {"bindAddress": f"127.0.0.1:{p.trainer_metrics}", "secureServing": True},
                    "health": {
                        "healthProbeBindAddress": f"127.0.0.1:{p.trainer_health}",
                        "readinessEndpointName": "readyz",
                        "livenessEndpointName": "healthz",
                    },
                }
            )
        )
        controllers = [(jobset, p.jobset_health), (kueue, p.kueue_health)]
        if self.runs("lws"):
            controllers.append((self._start_lws(), p.lws_health))
        if self.runs("trainer"):
            controllers.append((self._start_trainer(trainer_cfg, trainer_tmp), p.trainer_health))
        for proc, port in controllers:
            self._wait(
                proc,
                "controller /readyz (webhook server started)",
                lambda port=port: _http_ok(f"http://127.0.0.1:{port}/readyz"),
            )

    def _start_trainer(self, trainer_cfg: Path, trainer_tmp: Path) -> Process:
        v = self.versions
        # controller-runtime reads webhook certs from $TMPDIR/k8s-webhook-server/serving-certs.
        return self._spawn(
            "trainer-controller-manager",
            v.trainer,
            "trainer-controller-manager",
            [
                f"--config={trainer_cfg}",
                f"--kubeconfig={self._controller_kubeconfig('trainer')}",
                "--zap-log-level=info",
            ],
            env={"TMPDIR": str(trainer_tmp)},
        )

    def _controller_config(
        self, name: str, api_version: str, webhook_port: int, health_port: int, metrics: str = "0"
    ) -> Path:
        """A controller-runtime manager's config for loopback: no leader election, no internal cert
        management (our CA's serving cert in certs/<name>), webhook and health on 127.0.0.1, metrics at
        `metrics` ("0": off)."""
        certs = self.workdir / "certs" / name
        self._webhook_certs(certs)
        path = self.workdir / "config" / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": api_version,
                    "kind": "Configuration",
                    "leaderElection": {"leaderElect": False},
                    "internalCertManagement": {"enable": False},
                    "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(certs)},
                    "metrics": {"bindAddress": metrics},
                    "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
                }
            )
        )
        return path

    def _start_lws(self) -> Process:
        """The LeaderWorkerSet controller (Trainer's data cache creates an LWS per TrainJob)."""
        p = self.ports
        cfg = self._controller_config("lws", "config.lws.x-k8s.io/v1alpha1", p.lws_webhook, p.lws_health)
        return self._spawn(
            "lws-manager",
            self.versions.lws,
            "lws-manager",
            [f"--config={cfg}", f"--kubeconfig={self._controller_kubeconfig('lws')}", "--zap-log-level=info"],
        )

    def metrics_urls(self) -> dict[str, str]:
        """Each controller's secure metrics endpoint (self-signed TLS; JobSet and Kueue check a token)."""
        p = self.ports
        return {
            "jobset": f"https://127.0.0.1:{p.jobset_metrics}/metrics",
            "kueue": f"https://127.0.0.1:{p.kueue_metrics}/metrics",
            "trainer": f"https://127.0.0.1:{p.trainer_metrics}/metrics",
        }

    def _webhook_certs(self, directory: Path) -> None:
        self.ca.issue(
            "webhook",
            "webhook",
            hosts=("127.0.0.1", "localhost"),
            directory=directory,
            cert_file="tls.crt",
            key_file="tls.key",
        )

    def _ensure_kueue_metrics_certs(self) -> None:
        """Kueue exits without /etc/kueue/metrics/certs/tls.{crt,key} when it does not manage certs."""
        if (KUEUE_METRICS_CERT_DIR / "tls.crt").exists() and (KUEUE_METRICS_CERT_DIR / "tls.key").exists():
            return
        if KUEUE_METRICS_CERT_DIR.parent.parent.exists():
            raise SandboxError(f"{KUEUE_METRICS_CERT_DIR.parent.parent} exists but lacks metrics certs")
        try:
            self.ca.issue(
                "kueue-metrics",
                "kueue-metrics",
                hosts=("127.0.0.1",),
                directory=KUEUE_METRICS_CERT_DIR,
                cert_file="tls.crt",
                key_file="tls.key",
            )
        except PermissionError as exc:
            raise SandboxError(
                f"Kueue v{self.versions.kueue} needs {KUEUE_METRICS_CERT_DIR}/tls.{{crt,key}} "
                f"(hard-coded when internal cert management is off) and it cannot be created: {exc}"
            ) from exc
        self._created_kueue_metrics_certs = True

    # -- webhooks -------------------------------------------------------------
    def webhook_configurations(self) -> list[Obj]:
        """Upstream webhook configurations of the pinned versions, pointed at our ports."""
        v = self.versions
        up = self.shared / "upstream"
        return [
            *localize(
                load_upstream_webhooks(up / "jobset" / f"v{v.jobset}"),
                "jobset",
                self.ports.jobset_webhook,
                self.ca.cert_pem,
            ),
            *localize(
                load_upstream_webhooks(up / "kueue" / f"v{v.kueue}"),
                "kueue",
                self.ports.kueue_webhook,
                self.ca.cert_pem,
            ),
            *(
                localize(
                    load_upstream_webhooks(up / "trainer" / f"v{v.trainer}"),
                    "trainer",
                    self.ports.trainer_webhook,
                    self.ca.cert_pem,
                )
                if self.runs("trainer")
                else []
            ),
            *(
                localize(
                    load_kustomized_webhooks(self.lws_module() / "config" / "webhook"),
                    "lws",
                    self.ports.lws_webhook,
                    self.ca.cert_pem,
                )
                if self.runs("lws")
                else []
            ),
        ]

    def _register_webhooks(self) -> None:
        for cfg in self.webhook_configurations():
            self.client.apply(cfg)
        # Probe each controller through the API server with a dry-run create: a connection
        # failure says "failed calling webhook"; any other answer means the path works.
        probes = {
            "jobset": _probe_jobset(),
            "kueue": {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "e2e-webhook-probe"},
            },
            "trainer": _probe_runtime(),
            "lws": _probe_lws(),
        }
        for component in ("trainer", "lws"):
            if not self.runs(component):
                del probes[component]
        for component, obj in probes.items():

            def reachable(obj: Obj = obj) -> bool:
                try:
                    self.client.create(obj, dry_run=True)
                except ApiError as exc:
                    if "failed calling webhook" in exc.message:
                        raise
                return True

            wait_for(f"the API server to reach the {component} webhooks", reachable, TIMEOUT)

    # -- state ----------------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "versions": self.versions.__dict__,
            "server": self.server,
            "kubeconfig": str(self.kubeconfig),
            "ports": self.ports.__dict__,
            "processes": [
                {"name": p.name, "version": p.version, "pid": p.pid, "binary": str(p.binary), "log": str(p.log)}
                for p in self.processes
            ],
        }
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")

    # -- objects --------------------------------------------------------------
    def create_kwok_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        capacity: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        pod_cidr: str | None = None,
    ) -> Obj:
        """A fake node managed by kwok (same shape as kwok's docs); kwok gives its Pods IPs from ``pod_cidr``."""
        cap = {"cpu": "32", "memory": "256Gi", "pods": "110", **(capacity or {})}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {**KWOK_ANNOTATION, "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    **(labels or {}),
                },
            },
            "spec": {"taints": taints or [], **({"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]} if pod_cidr else {})},
            "status": {"capacity": cap, "allocatable": cap},
        }
        return self.client.apply(node)


def _exit_on_sigterm() -> None:
    """Turn SIGTERM (CI timeout, ``kill``) into SystemExit so atexit stops our processes.

    The children run in their own sessions (so Ctrl-C in a terminal does not hit them before
    we stop them in order); without this a SIGTERM would leave them running.
    """
    import threading

    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        None,
    ):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class _ProcessDiedError(FatalWaitError):
    pass


def _condition(obj: Obj, cond_type: str) -> bool:
    return any(
        c.get("type") == cond_type and c.get("status") == "True" for c in obj.get("status", {}).get("conditions", [])
    )


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return bool(r.status == 200)


def _https_ok(url: str) -> bool:
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
        return bool(r.status == 200)


def _terminate(proc: Process, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL after ``grace`` seconds."""
    if not proc.alive():
        if proc.popen is not None:
            proc.popen.wait(timeout=1)
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.popen is not None:
            if proc.popen.poll() is not None:
                return
        elif not pid_matches(proc.pid, proc.binary):
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if proc.popen is not None:
        proc.popen.wait(timeout=5)


#: kwok's own stages (read from the kwok module of the pinned version at run time), minus pod-complete.
KWOK_UPSTREAM_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
COMPLETE_LABEL = "e2e.trainer-platform/complete"
#: A Running pod with this annotation (a Go duration, e.g. ``"12.5s"``) succeeds that long after kwok saw it
#: Running: how `simulate` makes a trace job's pods run for the row's (compressed) duration.
DURATION_ANNOTATION = "simulate.trainer-platform.io/duration"
#: Label a running pod with an exit code (``"1"``, ``"42"``) and kwok makes it fail with that code.
FAIL_LABEL = "e2e.trainer-platform/fail"


def kwok_stages(kwok_version: str) -> list[Obj]:
    """kwok stages: upstream's fast node and pod stages, except that pods stay Running.

    kwok's default ``pod-complete`` finishes every Job-owned pod at once, which would free
    Kueue quota immediately; the scenarios need pods that hold their quota. Pods labelled
    ``e2e.trainer-platform/complete=true`` still complete (initializers, for instance).
    Since kwok 0.8 a config with any Stage replaces all defaults, so node stages are listed too.
    """
    root = module_dir("sigs.k8s.io/kwok", kwok_version)
    stages = [yaml.safe_load((root / rel).read_text()) for rel in KWOK_UPSTREAM_STAGES]
    return [
        *stages,
        kwok_complete_stage(),
        kwok_complete_stage(initializers=True),
        kwok_fail_stage(),
        kwok_duration_stage(),
    ]


def kwok_duration_stage() -> Obj:
    """Our stage: a Running pod annotated with a duration succeeds after it (kwok's stage delay, read from the
    annotation and measured from when kwok saw the pod Running)."""
    stage = _terminate_stage(
        "pod-complete-after-duration",
        {"key": f'.metadata.annotations["{DURATION_ANNOTATION}"]', "operator": "Exists"},
        exit_code="0",
        reason="Completed",
        phase="Succeeded",
    )
    stage["spec"]["delay"] = {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": f'.metadata.annotations["{DURATION_ANNOTATION}"]'},
    }
    return stage


def kwok_fail_stage() -> Obj:
    """Our stage: a Running pod labelled ``e2e.trainer-platform/fail=<exit code>`` fails, every container
    terminated with that code (what the Job controller's podFailurePolicy reads)."""
    return _terminate_stage(
        "pod-fail-on-request",
        {"key": f'.metadata.labels["{FAIL_LABEL}"]', "operator": "Exists"},
        exit_code=f'{{{{ index $.metadata.labels "{FAIL_LABEL}" }}}}',  # `$`: the pod (`.` is the container here)
        reason="Error",
        phase="Failed",
    )


def kwok_complete_stage(*, initializers: bool = False) -> Obj:
    """Our stage: a Running pod carrying the complete label succeeds.

    With ``initializers``: pods of a JobSet's ``dataset-initializer``/``model-initializer`` jobs
    succeed too (they download and exit in real life; trainers run until stopped).
    """
    if initializers:
        name, selector = (
            "pod-complete-initializers",
            {
                "key": '.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"]',
                "operator": "In",
                "values": ["dataset-initializer", "model-initializer"],
            },
        )
    else:
        name, selector = (
            "pod-complete-on-request",
            {"key": f'.metadata.labels["{COMPLETE_LABEL}"]', "operator": "In", "values": ["true"]},
        )
    return _terminate_stage(name, selector, exit_code="0", reason="Completed", phase="Succeeded")


def _terminate_stage(name: str, selector: Obj, *, exit_code: str, reason: str, phase: str) -> Obj:
    """A kwok Stage that ends a selected Running pod: every container terminated, the pod in ``phase``."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    selector,
                ]
            },
            "next": {
                "statusTemplate": "\n".join(
                    [
                        "{{ $now := Now }}",
                        "containerStatuses:",
                        "{{ range .spec.containers }}",
                        "- name: {{ .name | Quote }}",
                        "  image: {{ .image | Quote }}",
                        "  ready: false",
                        "  restartCount: 0",
                        "  started: false",
                        "  state:",
                        "    terminated:",
                        f"      exitCode: {exit_code}",
                        f"      reason: {reason}",
                        "      startedAt: {{ $now | Quote }}",
                        "      finishedAt: {{ $now | Quote }}",
                        "{{ end }}",
                        f"phase: {phase}",
                    ]
                )
            },
        },
    }


def _probe_jobset() -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "e2e-webhook-probe", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                            }
                        }
                    },
                }
            ]
        },
    }


def _probe_lws() -> Obj:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "e2e-webhook-probe", "namespace": "default"},
        "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": pod}},
    }


def _probe_runtime() -> Obj:
    """Schema-valid, so the API server gets as far as the validating webhook."""
    return minimal_runtime("e2e-webhook-probe", {"image": "busybox"})
