"""A container-free Kubernetes + Trainer/JobSet/Kueue sandbox made of plain processes on loopback.

Used by `trainer-infra simulate`, the platform sandbox and ``trainer-infra sandbox controlplane up|down|status``.

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
import shutil
import urllib.request
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from trainer_infra.core.upstream import kubernetes
from trainer_infra.core.upstream.jobset import CONFIG_API as JOBSET_CONFIG_API
from trainer_infra.core.upstream.kueue import CONFIG_GROUP as KUEUE_CONFIG_GROUP
from trainer_infra.core.upstream.lws import CONFIG_API as LWS_CONFIG_API
from trainer_infra.core.upstream.lws import GO_MODULE as LWS_MODULE
from trainer_infra.sandbox.apply import apply_objects
from trainer_infra.sandbox.charts import ChartIdentities, chart_identities
from trainer_infra.sandbox.controller_configs import (
    controller_manager_flags,
    kueue_config,
    kwok_flags,
    manager_config,
    scheduler_flags,
    trainer_config,
)
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.kwok_stages import kwok_node, kwok_stages
from trainer_infra.sandbox.pki import CertificateAuthority, CertPair, service_account_keypair
from trainer_infra.sandbox.probes import has_condition, http_ok, https_ok, webhook_probes
from trainer_infra.sandbox.processes import (
    TIMEOUT,
    Endpoints,
    Process,
    SandboxError,
    exit_on_sigterm,
    spawn,
    terminate,
    wait_process,
)
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
#: the API server's user towards kubelets (kubeadm's name)
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
#: the aggregation layer's client (kubeadm's name): the only identity whose X-Remote-* headers extension servers trust
FRONT_PROXY_CLIENT = "front-proxy-client"


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
        extra_crds: Sequence[Path] = (),
    ) -> None:
        self.workdir = workdir.resolve()
        #: CRD files installed with the pinned ones, before any controller starts: a controller that sets a part up
        #: only when the API serves its kind at start (Kueue's ProvisioningRequest admission check) sees them.
        self.extra_crds = list(extra_crds)
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
            exit_on_sigterm()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    @uninterruptible
    def stop(self) -> None:
        """Stop every process started (reverse order), then remove files we created outside workdir."""
        for proc in reversed(self.processes):
            terminate(proc)
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
                # the discovery doc's key URL, reached from pods (Trainer's status server verifies job tokens with
                # it, pkg/statusserver/auth.go); without it the API server builds it from --advertise-address,
                # 127.0.0.1, which in a pod is the pod itself
                "--service-account-jwks-uri=https://kubernetes.default.svc.cluster.local/openid/v1/jwks",
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
        p, v, kubeconfig = self.ports, self.versions.kubernetes, self.kubeconfig
        flags = controller_manager_flags(kubeconfig, self.sa_keys.key, self.ca.cert_path, SERVICE_CIDR, self.workdir)
        kcm = self._spawn("kube-controller-manager", v, "kube-controller-manager", flags)
        sched = self._spawn("kube-scheduler", v, "kube-scheduler", scheduler_flags(kubeconfig, p.scheduler))
        kwok_config = self.workdir / "config" / "kwok.yaml"
        kwok_config.write_text(yaml.safe_dump_all(kwok_stages(self.versions.kwok), sort_keys=False))
        kwok = self._spawn("kwok", self.versions.kwok, "kwok", kwok_flags(kubeconfig, kwok_config, POD_CIDR, p.kwok))
        self._wait(
            kcm,
            "the default ServiceAccount (created by kube-controller-manager)",
            lambda: self.client.get("v1", "ServiceAccount", "default", "default"),
        )
        self._wait(sched, "kube-scheduler /healthz", lambda: https_ok(f"https://127.0.0.1:{p.scheduler}/healthz"))
        self._wait(kwok, "kwok /healthz", lambda: http_ok(f"http://127.0.0.1:{p.kwok}/healthz"))

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
            raise SandboxError(f"no CRDs in {LWS_MODULE} v{self.versions.lws} config/crd/bases")
        return [*files, *monitoring_crd_files(v.prometheus_operator), *lws_crds, *self.extra_crds]

    def lws_module(self) -> Path:
        """LeaderWorkerSet's module at the pinned version: its CRD and webhook manifests are read from
        there (the shared folder has none: LWS only comes with the Trainer chart's data cache)."""
        return module_dir(LWS_MODULE, self.versions.lws)

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
                if not has_condition(
                    self.client.get(kubernetes.APIEXTENSIONS_API, "CustomResourceDefinition", n), "Established"
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
        p = self.ports
        v = self.versions

        jobset_cfg = self._controller_config(
            "jobset",
            JOBSET_CONFIG_API,
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
        kueue_cfg = self._write_config(
            "kueue",
            kueue_config(
                self.versions.api_version(KUEUE_CONFIG_GROUP),
                p.kueue_webhook,
                p.kueue_health,
                p.kueue_metrics,
                kueue_certs,
                self.kueue_settings,
            ),
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
        trainer_cfg = self._write_config(
            "trainer", trainer_config(p.trainer_webhook, p.trainer_health, p.trainer_metrics)
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
                lambda port=port: http_ok(f"http://127.0.0.1:{port}/readyz"),
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
        """A controller-runtime manager's config file, its serving certificate from our CA in certs/<name>."""
        certs = self.workdir / "certs" / name
        self._webhook_certs(certs)
        return self._write_config(name, manager_config(api_version, webhook_port, health_port, certs, metrics))

    def _write_config(self, name: str, config: Obj) -> Path:
        path = self.workdir / "config" / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _start_lws(self) -> Process:
        """The LeaderWorkerSet controller (Trainer's data cache creates an LWS per TrainJob)."""
        p = self.ports
        cfg = self._controller_config("lws", LWS_CONFIG_API, p.lws_webhook, p.lws_health)
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
        v, p, up = self.versions, self.ports, self.shared / "upstream"
        sources = [
            ("jobset", load_upstream_webhooks(up / "jobset" / f"v{v.jobset}"), p.jobset_webhook),
            ("kueue", load_upstream_webhooks(up / "kueue" / f"v{v.kueue}"), p.kueue_webhook),
        ]
        if self.runs("trainer"):
            sources.append(("trainer", load_upstream_webhooks(up / "trainer" / f"v{v.trainer}"), p.trainer_webhook))
        if self.runs("lws"):
            lws = load_kustomized_webhooks(self.lws_module() / "config" / "webhook")
            sources.append(("lws", lws, p.lws_webhook))
        return [cfg for name, configs, port in sources for cfg in localize(configs, name, port, self.ca.cert_pem)]

    def _register_webhooks(self) -> None:
        for cfg in self.webhook_configurations():
            self.client.apply(cfg)
        # Probe each controller through the API server with a dry-run create: a connection
        # failure says "failed calling webhook"; any other answer means the path works.
        probes = webhook_probes(self.versions)
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
        """A fake node managed by kwok; kwok gives its Pods IPs from ``pod_cidr``."""
        return self.client.apply(kwok_node(name, labels=labels, capacity=capacity, taints=taints, pod_cidr=pod_cidr))
