"""One real node for every ``test_node*`` file of a pytest session (issue #28): the control plane with the platform's
controllers, the e2e registry as ``images.registryMirror``, the real node (kubelet + containerd) and its cluster
network (kube-proxy, CoreDNS as a pod, kube-router enforcing NetworkPolicies).

Starting all that costs ≈ 30–40 s; the files share it (``node_session``). The platform (the stack rendered for this
node, its team exports, the torch stand-in image) is applied on first use (``node_platform``): the node's own
tests and the network tests run before it, on namespaces of their own. The session's end is checked like a test:
every image containerd holds came from the mirror with the digest published there, and stopping leaves no process,
mount, device, rule, ipset, cgroup or container task (a failure shows as an error at the last test's teardown).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import cluster_network as net
from tests.e2e import node as node_mod
from tests.e2e.build import Builder
from tests.e2e.chart_registry import ChartRegistry
from tests.e2e.cluster_network import ClusterNetwork, NetworkSandbox
from tests.e2e.node import MIRROR, NodeError, RealNode, publish
from tests.e2e.oci_images import Image, busybox_image, busybox_version, pause_image
from tests.e2e.platform import Platform, wait_admission_enforced
from tests.e2e.render import RenderOutput, apply_render, controller_users, kueue_settings, render_stack
from tests.e2e.runtime_images import TORCH, stand_in_image
from tests.e2e.sandbox import Sandbox
from tests.e2e.versions import REPO_ROOT

Obj = dict[str, Any]
NODE = "e2e-node-0"
GPU = "nvidia.com/gpu"
#: GPUs the node claims to have (none is real)
NODE_GPUS = 8
#: the uid/gid the platform runs runtimes as (runtimes.securityContext defaults)
TRAINER_ID = 1000
#: the runtimes the node's stack serves to every team
RUNTIMES = ["torch-distributed", "xgboost-distributed", "jax-distributed"]
#: MPI runtimes, served as TrainingRuntimes of the first team (`restricted`: their sshd adds back NET_BIND_SERVICE,
#: docs/teams.md#pod-security)
MPI_RUNTIMES = ["deepspeed-distributed", "mlx-distributed"]
#: whole-JobSet restarts of the node's stack (the catalog's default is 3): a job that fails for good (the OOM
#: scenario) fails after one restart, a killed one (the resume scenario) still gets its restart
MAX_RESTARTS = 1


def node_stack() -> dict[str, Any]:
    """Top-level keys over the `local` stack: its GPU pool becomes the real node (`static` backend, one block),
    quotas fit that node, claims come from an `existing` class, the first team is `restricted`."""
    local = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    teams = local["trainer-platform:teams"]
    for team in teams:
        team["quota"] = {"h100": {"gpus": NODE_GPUS // len(teams)}}
    teams[0]["podSecurity"] = "restricted"
    components = local["trainer-platform:components"]
    # the first pull of the stand-in (≈ 450 MB) counts against waitForPodsReady
    components["kueue"]["waitForPodsReady"] = {"timeout": "10m"}
    return {
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
                "static": {
                    "nodes": [
                        {
                            "name": NODE,
                            "topology": {"trainer-platform.io/block": "b0", "trainer-platform.io/rack": "r0"},
                        }
                    ]
                },
            }
        ],
        "storage": {"existing": {"className": "e2e-host-directory"}},
        "dataCache": {"enabled": False},
        "runtimes": {
            "enabled": RUNTIMES,
            "teams": [{"team": teams[0]["name"], "runtime": name} for name in MPI_RUNTIMES],
            "faultTolerance": {"maxRestarts": MAX_RESTARTS},
        },
        "teams": teams,
    }


# -- the export ------------------------------------------------------------------------------------------------

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


# -- the session -----------------------------------------------------------------------------------------------


class PlatformNodeSandbox(NetworkSandbox):
    """``NetworkSandbox`` (the API server reachable from pods) with the platform's controllers, as the default
    sandbox runs them (JobSet, Kueue, Trainer, LWS with the stack's Kueue settings and controller identities)."""

    def _start(self) -> None:
        Sandbox._start(self)

    def _check_binaries(self) -> None:
        Sandbox._check_binaries(self)
        super()._check_binaries()


@dataclass
class NodeSession:
    sandbox: Sandbox
    registry: ChartRegistry
    node: RealNode
    network: ClusterNetwork
    #: the stack rendered for this node (``node_stack``); ``node_platform`` applies it
    render: RenderOutput
    workdir: Path
    #: every mirrored reference published for the node → the manifest digest served under it
    published: dict[str, str] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    _busybox_ref: str = ""

    def publish(self, upstream: str, image: Image) -> str:
        """Serve ``image`` where the stack's mirror puts ``upstream``; return the reference the node pulls."""
        return self.network.publish(upstream, image)

    def busybox_ref(self) -> str:
        """busybox (Debian's static build) published once through the mirror: the reference pods use."""
        if not self._busybox_ref:
            self._busybox_ref = self.publish(f"docker.io/library/busybox:{busybox_version()}", busybox_image())
        return self._busybox_ref

    def assert_ran_from_mirror(self, pod: Obj) -> None:
        """Every container of ``pod`` ran the image published under its mirrored reference: the kubelet's
        ``imageID`` is the mirror's repository at the digest this session published there."""
        for status in pod["status"].get("initContainerStatuses", []) + pod["status"]["containerStatuses"]:
            assert status["image"] in self.published, (status["image"], sorted(self.published))
            repository = status["image"].rsplit(":", 1)[0]
            assert status["imageID"] == f"{repository}@{self.published[status['image']]}", status

    def containerd_images(self) -> dict[str, str]:
        """containerd's images in the CRI namespace (every pod's, the pause sandbox's and CoreDNS's): reference (by
        tag or by digest) → manifest digest."""
        listing = self.node.ctr("images", "ls")
        if listing.returncode != 0:
            raise NodeError(f"`ctr images ls` failed: {listing.stderr.strip()}")
        rows = (line.split() for line in listing.stdout.splitlines()[1:])
        # a reference named ``sha256:…`` is the image ID (the config digest) of one of the others
        return {row[0]: row[2] for row in rows if not row[0].startswith("sha256:")}

    def from_the_mirror(self, ref: str, digest: str) -> bool:
        """``ref`` names a repository of the mirror this session published, and ``digest`` is what it published."""
        repository = ref.split("@", 1)[0] if "@" in ref else ref.rsplit(":", 1)[0]
        published = {r.rsplit(":", 1)[0]: d for r, d in self.published.items()}
        return ref.startswith(f"{MIRROR}/") and digest in self.published.values() and repository in published

    def stop(self) -> dict[str, list[str]]:
        """CoreDNS, kube-proxy, kube-router, the node; what is left of them (empty lists: nothing)."""
        self.network.stop()
        self.node.stop()
        self.network.remove_ipsets()
        return {k: v for k, v in {**self.node.leftovers(), **self.network.leftovers()}.items() if v}


@pytest.fixture(scope="session")
def node_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeSession]:
    node_mod.preflight(tmp_path_factory.getbasetemp())
    net.preflight()
    times: dict[str, float] = {}
    start = time.monotonic()
    render = render_stack("local", tmp_path_factory.mktemp("node-render") / "out", extra=node_stack())
    times["node stack rendered"] = round(time.monotonic() - start, 1)
    sandbox = PlatformNodeSandbox(
        tmp_path_factory.mktemp("node-sandbox"),
        kueue_settings=kueue_settings(render),
        controller_users=controller_users(render),
    )
    if os.environ.get("E2E_NO_BUILD") != "1":
        Builder(sandbox.versions).build(node=True)
    start = time.monotonic()
    with sandbox:
        times["sandbox start (control plane, controllers)"] = round(time.monotonic() - start, 1)
        cert = sandbox.ca.issue("registry", "e2e-registry", hosts=("127.0.0.1",))
        with ChartRegistry([], cert=cert.cert, key=cert.key) as registry:
            workdir = tmp_path_factory.mktemp("node")
            published: dict[str, str] = {}

            def mirror(upstream: str, image: Image) -> str:
                ref = publish(registry, upstream, image)
                published[ref] = image.digest
                return ref

            pause_ref = mirror(node_mod.PAUSE_IMAGE, pause_image(Builder(sandbox.versions).binary("pause")))
            node = RealNode(
                sandbox,
                workdir,
                registry_hosts={MIRROR.split("/")[0]: f"https://{registry.host}"},
                registry_ca=sandbox.ca.cert_path,
                sandbox_image=pause_ref,
                name=NODE,
                node_ip=net.NODE_IP,
                cluster_dns=net.DNS_SERVICE_IP,
            )
            session = NodeSession(
                sandbox, registry, node, ClusterNetwork(node, mirror), render, workdir, published, times
            )
            try:
                start = time.monotonic()
                session.node.start()
                times["node start (containerd, kubelet, Ready)"] = round(time.monotonic() - start, 1)
                session.network.start()
                times.update(session.network.times)
                start = time.monotonic()
                session.node.advertise(GPU, NODE_GPUS)
                times["GPUs advertised"] = round(time.monotonic() - start, 1)
                yield session
                held = session.containerd_images()
                foreign = sorted(
                    f"{ref} {digest}" for ref, digest in held.items() if not session.from_the_mirror(ref, digest)
                )
                assert not foreign, f"containerd holds images not published through the mirror: {foreign}"
                ran = {pause_ref, session.network.coredns_ref}
                assert ran <= held.keys(), (ran, held)
                start = time.monotonic()
                left = session.stop()
                times["teardown (network, node)"] = round(time.monotonic() - start, 1)
                assert not left, f"the real node and its network left {left}"
            finally:
                session.stop()
                print(f"\n[node session] measured: {times}", flush=True)


@dataclass
class NodePlatform:
    """The node's stack applied: its teams, the host directories behind their claims, the torch stand-in."""

    platform: Platform
    exports: Path
    torch: Image
    torch_ref: str


@pytest.fixture(scope="session")
def node_platform(node_session: NodeSession) -> NodePlatform:
    session, times = node_session, node_session.times
    runtime = next(
        o for o in session.render.of_kind("ClusterTrainingRuntime") if o["metadata"]["name"] == "torch-distributed"
    )
    start = time.monotonic()
    torch = stand_in_image(TORCH)  # built before the session by python -m tests.e2e.run (it needs the network)
    times["torch stand-in image read"] = round(time.monotonic() - start, 1)
    torch_ref = session.publish(TORCH.upstream, torch)
    assert torch_ref == trainer_container(runtime)["image"], torch_ref
    exports = session.workdir.parent / f"{session.workdir.name}-exports"
    for claim in session.render.of_kind("PersistentVolumeClaim"):
        prepare_export(exports / claim["metadata"]["namespace"] / claim["metadata"]["name"])
    start = time.monotonic()
    applied = apply_render(session.sandbox, session.render.directory, volume_root=exports)
    platform = Platform(applied, list(applied.objects))
    for team in platform.render_teams():
        wait_admission_enforced(session.sandbox.client, team.namespace)
    times["render applied"] = round(time.monotonic() - start, 1)
    return NodePlatform(platform, exports, torch, torch_ref)


def trainer_container(runtime: Obj) -> Obj:
    """The trainer container (``node`` in the ``node`` replicated job) of a ClusterTrainingRuntime."""
    job = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    container: Obj = next(c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node")
    return container
