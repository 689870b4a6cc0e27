"""``make sandbox-up`` / ``make sandbox-down``: the platform as the real ``pulumi up`` of the local stack installs
it, on a real node where a team member's TrainJob trains, left running for a person at a terminal.

``up`` builds what is missing (outside any namespace: the Debian archive may be needed), then starts a daemon
that holds everything: it binds the API server's port on the host's 127.0.0.1 first, then moves into a network
and a mount namespace of its own (the node's bridge, iptables/ipset rules, pod mounts and the tmpfs over
containerd's fixed folders never touch the host), starts ``ChartSandbox`` there (control plane, kwok, the real
node, its cluster network) with the node untainted and advertising GPUs, and runs the real ``pulumi up`` of the
sandbox stack (``sandbox_stack``). It forwards the host port to the API server inside, so the kubeconfigs work
from the host unchanged. The namespaces live exactly as long as the daemon and its children: ``down`` asks the
daemon to stop (SIGTERM), which stops the node, its network and the control plane and checks that they left
nothing (``ChartSandbox.leftovers``), then checks the host side (no process, no listener, no mount).

Team claims are bound to host directories (``volumes/<namespace>/<claim>`` in the state directory), prepared as
an NFS export comes (root's, 0755) with the ACL an admin adds for uid 1000 (``prepare_export``, docs/storage.md);
they are kept by ``down`` (data), and reused by the next ``up``.

The e2e's real-node scenarios (training, NetworkPolicies, the runtimes: ``make e2e-sandbox``) run on this sandbox as
its team members (the e2e sandbox session): what the sandbox stack (``sandbox_stack``) sets, they rely on.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.upstream import kubernetes, nvidia
from trainer_infra.core.upstream.containerd import CRI_NAMESPACE
from trainer_infra.nodepools import pids
from trainer_infra.nodepools.static import node_names
from trainer_infra.sandbox import leftovers, node_host
from trainer_infra.sandbox.chart_sandbox import REAL_NODE, ChartSandbox
from trainer_infra.sandbox.cluster_network import NODE_IP
from trainer_infra.sandbox.hub import HUB_IP, HUB_PORT, Hub
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.node import MIRROR, publish
from trainer_infra.sandbox.node_host import NodeError, containerd_socket
from trainer_infra.sandbox.oci_images import Image
from trainer_infra.sandbox.runtime_images import NOTEBOOK, stand_in_image
from trainer_infra.sandbox.served_images import runtime_images
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet, cache_root
from trainer_infra.stack.load import raw_from_stack_document
from trainer_infra.stack.validate import shape

Obj = dict[str, Any]
CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
#: folders containerd 1.6 and libcni use at fixed places: a tmpfs over each in the daemon's mount namespace
PRIVATE_DIRS = (Path("/run/containerd"), Path("/run/netns"), Path("/var/lib/cni"))
STATUS = "status.json"
SANDBOX_JSON = "sandbox.json"
#: how long ``up`` waits for the daemon (a first ``pulumi up`` on a loaded 2-core machine takes 5-10 min)
UP_TIMEOUT = 1800


GPU = nvidia.GPU
#: GPUs the real node claims to have (none is real)
NODE_GPUS = 8
#: the uid/gid the platform runs runtimes as (runtimes.securityContext defaults)
TRAINER_ID = 1000
#: the runtimes the sandbox stack serves to every team
RUNTIMES = ["torch-distributed", "xgboost-distributed", "jax-distributed", "torchtune-llama3.2-1b"]
#: the stand-in Hub's address (sandbox/hub.py), the initializers' `tenancy.hub.endpoint`; the first team's
#: `secrets.hfToken` is a token made per `up` (a Pulumi secret), the only one the Hub accepts
HUB_ENDPOINT = f"http://{HUB_IP}" if HUB_PORT == 80 else f"http://{HUB_IP}:{HUB_PORT}"
HUB_TOKEN_PATH = "trainer-platform:teams[0].secrets.hfToken"
#: MPI runtimes, served as TrainingRuntimes of the first team (`restricted`: their sshd adds back NET_BIND_SERVICE,
#: docs/teams.md#pod-security)
MPI_RUNTIMES = ["deepspeed-distributed", "mlx-distributed"]
#: whole-JobSet restarts of the sandbox stack (the catalog's default is 3): a job that fails for good (an OOM) fails
#: after one restart, a killed one still gets its restart
MAX_RESTARTS = 1
#: Kueue's waitForPodsReady timeout in the sandbox: the first job's pull of the torch stand-in (≈ 450 MB from the
#: local mirror) took 40-70 s to Complete (docs/sandbox.md), so 3 min leaves room, and a job whose pods never get
#: ready gives its team's GPUs back within the session (attack 4, test_sandbox_attacks.py)
PODS_READY_TIMEOUT = "3m"


def default_dir() -> Path:
    """The state directory: sandbox.json, the daemon's log, the run (wiped by each ``up``) and the volumes."""
    return cache_root() / "platform-sandbox"


def node_dir(workdir: Path) -> Path:
    """The real node's folder (containerd's root, state and socket; the kubelet's) in a state directory."""
    return workdir / "run" / "sandbox" / "node"


#: the team default a job that fills the node's disk meets (small, so that filling it takes seconds; the stand-ins
#: write far less)
EPHEMERAL_LIMIT = "512Mi"
EPHEMERAL_STORAGE = {"defaultRequest": "64Mi", "defaultLimit": EPHEMERAL_LIMIT, "max": "1Gi"}


def sandbox_extra(apiserver_port: int = 6443) -> Obj:
    """Top-level keys over ``stacks/Pulumi.local.yaml`` for a one-node cluster: the GPU pool is the real node
    (``static`` backend, one block; its taint not applied, so the node serves both the controllers and the jobs),
    quotas fit that node, its pods may run the fewest tasks the platform allows (``podPidsLimit``: a member's fork
    bomb on this shared machine, whose ``pid_max`` is often 32768, stops early) and a container's node disk is bounded
    small (``EPHEMERAL_LIMIT``), claims come from an ``existing`` class, the first team is ``restricted`` and also
    gets the MPI runtimes as TrainingRuntimes of its own, a failed job is restarted once, the images come through
    ``images.registryMirror`` (and team images only from it), ``waitForPodsReady`` allows the first pull of a
    stand-in image (``PODS_READY_TIMEOUT``), and the first team has a notebook (the notebook stand-in, the kubeflow
    SDK in it) that reaches the API server on the node's address and ``apiserver_port`` (``serve`` passes the real
    one)."""
    local = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    teams = local["trainer-platform:teams"]
    for team in teams:
        team["quota"] = {"h100": {"gpus": NODE_GPUS // len(teams)}}
    teams[0]["podSecurity"] = "restricted"
    # on the real node, not the kwok system node (untainted too: a pod there is never run)
    placement = {kubernetes.HOSTNAME_LABEL: REAL_NODE}
    teams[0]["notebook"] = {"image": NOTEBOOK.upstream, "cpu": "100m", "memory": "512Mi", "nodeSelector": placement}
    components = local["trainer-platform:components"]
    components["kueue"]["waitForPodsReady"] = {"timeout": PODS_READY_TIMEOUT}
    # images: the mirror only (the local stack's registries are for a cluster with the internet)
    tenancy = {
        **local.get("trainer-platform:tenancy", {}),
        "images": {},
        "ephemeralStorage": EPHEMERAL_STORAGE,
        "hub": {"endpoint": HUB_ENDPOINT},
    }
    tenancy["networkPolicies"] = {"apiServer": {"cidrs": [f"{NODE_IP}/32"], "port": apiserver_port}}
    return {
        "tenancy": tenancy,
        "components": components,
        "images": {"registryMirror": MIRROR},
        "nodePools": [
            {
                "name": "h100",
                "backend": "static",
                "node": {
                    "cpu": "2",
                    "memory": "16Gi",
                    "accelerator": {"count": NODE_GPUS, "product": "NVIDIA-H100-80GB-HBM3"},
                },
                "podPidsLimit": pids.FLOOR,
                "static": {
                    "nodes": [
                        {
                            "name": REAL_NODE,
                            "topology": {"trainer-platform.io/block": "b0", "trainer-platform.io/rack": "r0"},
                        }
                    ],
                    "applyTaints": False,
                },
            }
        ],
        # the team file service on the real node (the untainted kwok node would take it otherwise)
        "storage": {
            "existing": {"className": "e2e-host-directory"},
            "files": {"nodeSelector": {kubernetes.HOSTNAME_LABEL: REAL_NODE}},
        },
        "dataCache": {"enabled": False},
        "runtimes": {
            "enabled": RUNTIMES,
            "teams": [{"team": teams[0]["name"], "runtime": name} for name in MPI_RUNTIMES],
            "faultTolerance": {"maxRestarts": MAX_RESTARTS},
            # what containers without resources get (the initializers): Kueue charges a TrainJob's initializer pod
            # sets for the whole job, so the catalog's default (1 CPU each) left a torchtune job 2 CPUs + 250m on
            # this 2-CPU node: "insufficient quota for cpu" (seen on the real node)
            "defaultResources": {"requests": {"cpu": "100m", "memory": "512Mi"}},
        },
        "teams": teams,
    }


# -- the team exports ------------------------------------------------------------------------------------------

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
ACL_UNDEFINED = 0xFFFFFFFF


def acl(uid: int, gid: int) -> bytes:
    """A POSIX ACL xattr (``system.posix_acl_access`` or ``_default``) for a root-owned 0755 directory plus
    ``u:<uid>:rwx,g:<gid>:rwx`` (mask rwx), as ``setfacl -m``/``setfacl -d -m`` write it."""
    entries = [
        (ACL_USER_OBJ, 7, ACL_UNDEFINED),
        (ACL_USER, 7, uid),
        (ACL_GROUP_OBJ, 5, ACL_UNDEFINED),
        (ACL_GROUP, 7, gid),
        (ACL_MASK, 7, ACL_UNDEFINED),
        (ACL_OTHER, 5, ACL_UNDEFINED),
    ]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def prepare_export(path: Path) -> None:
    """A team's directory as an NFS export comes: root's, mode 0755. The kubelet creates ``jobs/<trainjob>`` in it
    itself (``subPathExpr``), as root, passing the root's mode to mkdir, so uid 1000 could not write its script or
    checkpoint there. The fix an admin applies (docs/storage.md): ``setfacl -m u:1000:rwx,g:1000:rwx`` and the same
    as a default ACL (``-d``). The default entries are inherited by every directory created inside, whoever creates
    it; the access entries raise the root's group bits (the ACL mask) to rwx, and the kubelet passes those bits on as
    the new directory's mask (with 0755 the inherited entries would be masked down to r-x)."""
    path.mkdir(parents=True)
    os.chown(path, 0, 0)
    path.chmod(0o755)
    for kind in ("access", "default"):
        os.setxattr(path, f"system.posix_acl_{kind}", acl(TRAINER_ID, TRAINER_ID))


def real_node_pids(stack: Obj) -> int:
    """The real node's per-pod PID limit: ``podPidsLimit`` of the pool whose static nodes name it in ``stack``, as
    validated (the default when the pool sets none), so the node carries what the stack it runs says."""
    cfg = shape(raw_from_stack_document(stack, "sandbox stack"), "sandbox stack", [])
    pool = next(p for p in cfg.node_pools if REAL_NODE in node_names(p))
    return pool.pod_pids_limit


def sandbox_stack(apiserver_port: int = 6443) -> Obj:
    """The stack file ``pulumi up`` deploys (``installation`` adds the context, the mirrors and the controllers'
    placement)."""
    doc: Obj = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())
    doc["config"].update({f"trainer-platform:{k}": v for k, v in sandbox_extra(apiserver_port).items()})
    return doc


class NodeSandbox(ChartSandbox):
    """``ChartSandbox`` whose real node is untainted and advertises ``NODE_GPUS`` GPUs (none is real), with the
    runtimes' CPU stand-in images (``images``: upstream reference → image) published under the catalog's
    references."""

    node_taints = ()

    def __init__(
        self, workdir: Path, images: dict[str, Image], pod_pids_limit: int, hub_token: str = "", **kwargs: Any
    ) -> None:
        super().__init__(workdir, **kwargs)
        self.runtime_images = images
        self.pod_pids_limit = pod_pids_limit
        #: mirrored reference → manifest digest of every stand-in published (sandbox.json ``runtimeImages``)
        self.runtime_refs: dict[str, str] = {}
        #: the stand-in Hub, on its own address of the sandbox's network (the node's pods route to it)
        self.hub = Hub(hub_token or secrets.token_hex(16), workdir / "hub-access.log")
        self.hub_started = False

    def _start(self) -> None:
        super()._start()
        assert self.node is not None and self.registry is not None
        began = time.monotonic()
        self.node.advertise(GPU, NODE_GPUS)
        for upstream, image in sorted(self.runtime_images.items()):
            self.runtime_refs[publish(self.registry, upstream, image)] = image.digest
        self.times["GPUs advertised, runtime stand-ins published"] = round(time.monotonic() - began, 1)
        node_host.run_host(["ip", "addr", "add", f"{HUB_IP}/32", "dev", "lo"])
        self.hub_started = True
        self.hub.start(HUB_IP, HUB_PORT)

    def stop(self) -> None:
        if self.hub_started:
            self.hub.stop()
            node_host.run_host(["ip", "addr", "del", f"{HUB_IP}/32", "dev", "lo"], check=False)
            self.hub_started = False
        super().stop()


# -- the daemon's namespaces and port forward ------------------------------------------------------------------


def _unshare() -> list[Path]:
    """Into a new network and mount namespace (before any thread starts: a threaded process cannot unshare its
    mount namespace); nothing mounted here propagates to the host. Returns the folders it had to create."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS | CLONE_NEWNET)")
    for cmd in (["mount", "--make-rprivate", "/"], ["ip", "link", "set", "lo", "up"]):
        subprocess.run(cmd, check=True, capture_output=True)
    created = [p for p in PRIVATE_DIRS if not p.exists()]
    for path in PRIVATE_DIRS:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(path)], check=True, capture_output=True)
    return created


def _unmount(created: list[Path]) -> None:
    for path in PRIVATE_DIRS:
        subprocess.run(["umount", str(path)], check=False, capture_output=True)
    for path in created:
        # a node of another session (host_share.py) may use the host's folder by now: it is that node's to remove
        with contextlib.suppress(OSError):
            path.rmdir()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _forward(listener: socket.socket, port: int) -> None:
    """Each connection to ``listener`` (bound in the host's namespace) to 127.0.0.1:``port`` in this one: TLS
    passes through, so the API server's certificate and the clients' certificates are unchanged."""
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            continue
        upstream.settimeout(None)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _write_status(workdir: Path, **fields: Any) -> None:
    tmp = workdir / f"{STATUS}.tmp"
    tmp.write_text(json.dumps({"pid": os.getpid(), **fields}, indent=2) + "\n")
    tmp.replace(workdir / STATUS)


def serve(workdir: Path, port: int) -> int:
    """The daemon: everything of the sandbox lives in its namespaces until SIGTERM."""
    from trainer_infra.sandbox.processes import log_tail
    from trainer_infra.sandbox.pulumi_stack import chart_archives, installation
    from trainer_infra.sandbox.render import bind_claims, check_versions, render_stack

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    created = _unshare()
    # until it is ready a SIGTERM (``up`` interrupted) ends the start: SystemExit, the with-blocks below stop what
    # started (from the start, not only once ``Sandbox.start`` sets it: a render or preflight may be running)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    threading.Thread(target=_forward, args=(listener, port), daemon=True).start()
    stop = threading.Event()
    run = workdir / "run"
    volumes = workdir / "volumes"
    times: dict[str, float] = {}
    began = time.monotonic()
    try:
        if run.exists():
            subprocess.run(["rm", "-rf", "--one-file-system", str(run)], check=True)
        (run / "render").mkdir(parents=True)
        base = sandbox_stack(port)
        render = render_stack("local", run / "render" / "out", extra=sandbox_extra(port))
        check_versions(render, VersionSet.from_env())
        node_host.preflight(run)
        images, unserved = runtime_images(render)
        images[NOTEBOOK.upstream] = stand_in_image(NOTEBOOK)
        if unserved:
            print(
                f"[sandbox] no stand-in image built for {unserved}: their jobs cannot pull (build them with "
                "`trainer-infra sandbox runtime-images`, then `make sandbox-up` again)",
                flush=True,
            )
        hub_token = "hf_" + secrets.token_hex(16)
        sandbox = NodeSandbox(
            run / "sandbox", images, real_node_pids(base), hub_token=hub_token, archives=chart_archives()
        )
        sandbox.ports.apiserver = port
        with installation(run, base, sandbox) as installed:
            times["sandbox started (control plane, real node, network, images)"] = round(time.monotonic() - began, 1)
            print(f"[sandbox] started: {json.dumps(sandbox.times)}", flush=True)
            claims = render.of_kind("PersistentVolumeClaim")
            for claim in claims:
                path = volumes / claim["metadata"]["namespace"] / claim["metadata"]["name"]
                if not path.exists():
                    prepare_export(path)
            bind_claims(sandbox.client, claims, volumes)
            step = time.monotonic()
            print("[sandbox] pulumi up (the real engine and provider; 5-10 min on 2 busy cores) ...", flush=True)
            installed.project.config_secret(HUB_TOKEN_PATH, hub_token)
            result = installed.project.up()
            times["pulumi up"] = result.seconds
            print(f"[sandbox] pulumi up: {result.seconds} s", flush=True)
            _wait_controllers(sandbox)
            times["controller pods Ready after the up"] = round(time.monotonic() - step - result.seconds, 1)
            doc = describe(sandbox, base, render, volumes, workdir)
            (workdir / SANDBOX_JSON).write_text(json.dumps(doc, indent=2) + "\n")
            times["up (daemon)"] = round(time.monotonic() - began, 1)
            # until now a SIGTERM ended the start at once (SystemExit, above); from now on it asks for the orderly
            # stop below
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            _write_status(workdir, state="ready", times=times, sandbox=str(workdir / SANDBOX_JSON))
            while not stop.wait(1):
                pass
            print("[sandbox] stopping ...", flush=True)
            _write_status(workdir, state="stopping")
            # cordoned, the drained pods are not replaced on it by their Deployments while the node stops
            sandbox.client.request(
                "PATCH",
                f"/api/v1/nodes/{REAL_NODE}",
                {"spec": {"unschedulable": True}},
                content_type="application/merge-patch+json",
            )
        # leaving installation() stopped everything and checked that nothing is left (an AssertionError
        # names it): processes of the run, the mirror's listener, the node's and the network's leftovers
    except BaseException as exc:
        print(f"[sandbox] failed: {type(exc).__name__}: {exc}", flush=True)
        node_log = run / "sandbox" / "node" / "logs" / "kubelet.log"
        if node_log.exists():
            print(f"[sandbox] kubelet log tail:\n{log_tail(node_log, 15)}", flush=True)
        _write_status(workdir, state="failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        _unmount(created)
    _write_status(workdir, state="down", left=[])
    print("[sandbox] stopped, nothing left", flush=True)
    return 0


def _wait_controllers(sandbox: NodeSandbox) -> None:
    """Every controller pod Ready on the real node, none restarted."""
    from trainer_infra.sandbox.kube import wait_for

    def ready() -> bool:
        return not sandbox.controller_problems()

    try:
        wait_for("the charts' controller pods to be Ready on the real node", ready, 300)
    except TimeoutError:
        raise NodeError("controller pods are not healthy:\n" + "\n".join(sandbox.controller_problems())) from None


def describe(sandbox: NodeSandbox, stack: Obj, render: Any, volumes: Path, workdir: Path) -> Obj:
    """sandbox.json: the admin kubeconfig, one kubeconfig per team member (a client certificate of the user in
    the team's groups, as an authenticator names them), per team claim the host directory behind it, the runtime
    images the mirror serves (CPU stand-ins) and the node's containerd (``ctr``)."""
    from trainer_infra.sandbox.probes import wait_admission_enforced

    queues = {q["metadata"]["namespace"]: q["metadata"]["name"] for q in render.of_kind("LocalQueue")}
    members = []
    for team in stack["config"]["trainer-platform:teams"]:
        namespace = team.get("namespace", team["name"])
        wait_admission_enforced(sandbox.client, namespace)
        groups = tuple(team.get("members", {}).get("groups", []))
        for user in team.get("members", {}).get("users", []):
            members.append(
                {
                    "user": user,
                    "groups": list(groups),
                    "team": team["name"],
                    "namespace": namespace,
                    "queue": queues.get(namespace),
                    "kubeconfig": str(sandbox.user_kubeconfig(user, groups)),
                }
            )
    claims = [
        {
            "namespace": c["metadata"]["namespace"],
            "claim": c["metadata"]["name"],
            "storageClassName": c["spec"].get("storageClassName"),
            "hostDirectory": str(volumes / c["metadata"]["namespace"] / c["metadata"]["name"]),
        }
        for c in render.of_kind("PersistentVolumeClaim")
    ]
    return {
        "server": sandbox.server,
        "adminKubeconfig": str(sandbox.kubeconfig),
        "members": members,
        "claims": claims,
        "node": REAL_NODE,
        "gpus": f"{NODE_GPUS} {GPU} advertised on {REAL_NODE} (not real: torch runs on the CPU)",
        "runtimeImages": dict(sorted(sandbox.runtime_refs.items())),
        "hub": {
            "endpoint": HUB_ENDPOINT,
            "accessLog": str(sandbox.hub.log),
            "token": sandbox.hub.token,
            "repos": {kind: repo for kind, repo in sorted(sandbox.hub.repos)},
        },
        "containerd": {"address": str(containerd_socket(node_dir(workdir))), "namespace": CRI_NAMESPACE},
        "logs": str(workdir / "sandbox.log"),
        "stop": "make sandbox-down",
    }


# -- up / down (the person's side) -----------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _status(workdir: Path) -> Obj:
    path = workdir / STATUS
    return json.loads(path.read_text()) if path.exists() else {}


def _prepare() -> None:
    """What the daemon cannot do without the network: root and packages checked, binaries, the Pulumi toolchain,
    the torch and notebook stand-ins built (each cached in ~/.cache/trainer-platform/e2e)."""
    from trainer_infra.sandbox import runtime_images
    from trainer_infra.sandbox.build import Builder
    from trainer_infra.sandbox.toolchain import Toolchain

    node_host.preflight(in_session=False)
    toolchain = Toolchain()
    toolchain.preflight()
    Builder(VersionSet.from_env()).build(node=True)
    toolchain.build()
    # the other runtimes' stand-ins are served when built (`trainer-infra sandbox runtime-images`: minutes each cold)
    runtime_images.build(runtime_images.TORCH)
    runtime_images.build(runtime_images.NOTEBOOK)  # the first team's notebook (67 MB, 196 s cold)


def up(workdir: Path) -> int:
    from trainer_infra.sandbox.build import BuildError
    from trainer_infra.sandbox.processes import free_port

    began = time.monotonic()
    if os.geteuid() != 0:
        print("sandbox-up: it must run as root (containerd, runc, mounts, cgroups, namespaces)", file=sys.stderr)
        return 1
    status = _status(workdir)
    if status.get("pid") and _alive(status["pid"]):
        print(f"sandbox-up: a sandbox already runs (pid {status['pid']}): `make sandbox-down` first", file=sys.stderr)
        return 1
    try:
        _prepare()
    except (NodeError, BuildError, RuntimeError) as exc:
        print(f"sandbox-up: {exc}", file=sys.stderr)
        return 1
    workdir.mkdir(parents=True, exist_ok=True)
    for name in (STATUS, SANDBOX_JSON):
        (workdir / name).unlink(missing_ok=True)
    log = workdir / "sandbox.log"
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "trainer_infra.sandbox.platform_sandbox",
        "serve",
        "--dir",
        str(workdir),
        "--port",
        str(port),
    ]
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            cmd,
            cwd=CHECKOUT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "SANDBOX_NO_BUILD": "1", "PYTHONUNBUFFERED": "1"},
        )
    print(f"sandbox-up: state directory {workdir} (daemon pid {daemon.pid}, log {log})", flush=True)
    shown = 0
    deadline = time.monotonic() + UP_TIMEOUT
    try:
        while True:
            text = log.read_text(errors="replace")
            print(text[shown:], end="", flush=True)
            shown = len(text)
            state = _status(workdir).get("state")
            if state == "ready":
                break
            if state in ("failed", "down") or daemon.poll() is not None or time.monotonic() > deadline:
                _stop_daemon(daemon)
                print(log.read_text(errors="replace")[shown:], end="")
                print(f"sandbox-up failed: {_status(workdir).get('error', 'see ' + str(log))}", file=sys.stderr)
                return 1
            time.sleep(2)
    except KeyboardInterrupt:
        # the daemon runs in a session of its own (Ctrl-C does not reach it): before it is ready, it is stopped
        print("\nsandbox-up: interrupted; stopping what the daemon started ...", flush=True)
        _stop_daemon(daemon)
        left = leftovers.processes_of(workdir / "run") + [f"mount {m}" for m in _host_mounts(workdir)]
        print("sandbox-up: interrupted; " + ("left behind:\n  " + "\n  ".join(left) if left else "nothing left"))
        return 130
    doc = json.loads((workdir / SANDBOX_JSON).read_text())
    print(next_steps(workdir, doc, round(time.monotonic() - began, 1)), flush=True)
    return 0


@uninterruptible
def _stop_daemon(daemon: subprocess.Popen[bytes]) -> None:
    """SIGTERM: before it is ready the daemon stops what it started (``serve``) and exits."""
    if daemon.poll() is None:
        daemon.terminate()
        daemon.wait(600)


def next_steps(workdir: Path, doc: Obj, seconds: float) -> str:
    member = doc["members"][0]
    claim = next(c for c in doc["claims"] if c["namespace"] == member["namespace"])
    return (
        f"\nSandbox is up in {seconds} s: the local stack as `pulumi up` installed it, on the real node "
        f"{doc['node']}.\n"
        f"  {workdir / SANDBOX_JSON} names every kubeconfig and the host directory behind each team claim.\n"
        f"  admin       : export KUBECONFIG={doc['adminKubeconfig']}\n"
        f"                kubectl get nodes,clustertrainingruntimes,clusterqueues,pods -A\n"
        f"  {member['user']} ({member['namespace']}): export KUBECONFIG={member['kubeconfig']}\n"
        f"  first job   : docs/sandbox.md#your-first-training-job (TrainerClient().train(), queue "
        f"{member['queue']!r})\n"
        f"  checkpoints : {claim['hostDirectory']}/jobs/<trainjob>/\n"
        f"  stop        : make sandbox-down (the volumes stay in {workdir / 'volumes'})"
    )


def _host_mounts(workdir: Path) -> list[str]:
    text = Path("/proc/self/mountinfo").read_text()
    return [line.split()[4] for line in text.splitlines() if line.split()[4].startswith(str(workdir))]


def down(workdir: Path) -> int:
    status = _status(workdir)
    pid = status.get("pid")
    if not pid or not _alive(pid):
        orphans = leftovers.processes_of(workdir / "run")
        if orphans:  # the daemon was killed (SIGKILL, OOM): what it started still runs in its namespaces
            print(
                f"sandbox-down: the daemon is gone but these still run (kill them, then `umount` what "
                f"`grep {workdir} /proc/*/mountinfo` lists):\n  " + "\n  ".join(orphans),
                file=sys.stderr,
            )
            return 1
        print(f"sandbox-down: no sandbox running from {workdir}")
        return 0
    began = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 600
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(1)
    if _alive(pid):
        print(f"sandbox-down: the daemon (pid {pid}) did not stop in 600 s: see {workdir / 'sandbox.log'}")
        return 1
    final = _status(workdir)
    left = list(final.get("left", [])) if final.get("state") == "down" else [f"the daemon failed: {final.get('error')}"]
    time.sleep(1)
    left += leftovers.processes_of(workdir / "run")
    server = json.loads((workdir / SANDBOX_JSON).read_text())["server"] if (workdir / SANDBOX_JSON).exists() else None
    if server:
        host, _, port = server.removeprefix("https://").rpartition(":")
        if leftovers.answering(host, int(port)):
            left.append(f"{server} still answers")
    left += [f"mount {m}" for m in _host_mounts(workdir)]
    if left:
        print("sandbox-down: left behind:\n  " + "\n  ".join(left), file=sys.stderr)
        return 1
    print(
        f"sandbox-down: stopped in {time.monotonic() - began:.1f} s; nothing left (no process, listener or mount on "
        f"the host; the node's devices, rules, ipsets, cgroups, mounts and container tasks checked before its "
        f"namespaces ended). The team volumes stay in {workdir / 'volumes'} (`rm -rf` them to start afresh)."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "serve"])
    parser.add_argument("--dir", type=Path, default=default_dir(), help="state directory (default: %(default)s)")
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workdir: Path = args.dir.resolve()
    if args.command == "serve":
        return serve(workdir, args.port)
    return up(workdir) if args.command == "up" else down(workdir)


if __name__ == "__main__":
    sys.exit(main())
