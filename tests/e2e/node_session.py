"""One real node for the node's own tests (issue #28: ``test_node.py``, ``test_node_network.py``): a control plane
without the platform (``NetworkSandbox``: its API server reachable from pods), the e2e registry as
``images.registryMirror``, the real node (kubelet + containerd) and its cluster network (kube-proxy, CoreDNS as a
pod, kube-router enforcing NetworkPolicies).

The platform's scenarios on a real node (training, the teams' NetworkPolicies, the runtimes) run on what the real
``pulumi up`` installed instead: tests/e2e/sandbox_session.py. The session's end is checked like a test: every image
containerd holds came from the mirror with the digest published there, and stopping leaves no process, mount,
device, rule, ipset, cgroup or container task (a failure shows as an error at the last test's teardown).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trainer_infra.sandbox import cluster_network as net
from trainer_infra.sandbox import node as node_mod
from trainer_infra.sandbox import node_host
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.cluster_network import ClusterNetwork, NetworkSandbox
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.node import MIRROR, RealNode, publish
from trainer_infra.sandbox.node_host import NodeError
from trainer_infra.sandbox.oci_images import Image, Layer, image, pause_image

Obj = dict[str, Any]
NODE = "e2e-node-0"
#: the marks of the session's files: opt-in, as root
NODE_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_NODE") != "1", reason="the real node is opt-in: make e2e-node (E2E_NODE=1)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the real node needs root (containerd, runc, mounts, cgroups)"),
]


#: Debian's busybox-static; its version is what the image's tag says.
BUSYBOX = Path("/bin/busybox")
#: The unprivileged user of the test image (the runtimes' securityContext runs as uid 1000 too).
USER_ID = 1000


def busybox_version(busybox: Path = BUSYBOX) -> str:
    """``1.35.0`` from the banner of Debian's busybox-static (the tag the image is published under)."""
    banner = subprocess.run([str(busybox)], capture_output=True, text=True, check=False).stdout
    first = banner.splitlines()[0] if banner else ""
    if not first.startswith("BusyBox v"):
        raise RuntimeError(f"{busybox} is not busybox (banner {first!r}): apt-get install busybox-static")
    return first.removeprefix("BusyBox v").split()[0].split("-")[0]


def busybox_image(busybox: Path = BUSYBOX) -> Image:
    """A shell and the usual tools (every busybox applet), a user ``app`` with uid/gid 1000, a world-writable
    ``/tmp``: enough for a pod to show who it runs as and what it may write."""
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    layer = Layer()
    for directory in ("bin", "etc"):
        layer.directory(directory)
    layer.file("bin/busybox", busybox.read_bytes(), 0o755)
    for applet in sorted(set(applets) - {"busybox"}):
        layer.symlink(f"bin/{applet}", "busybox")
    layer.file("etc/passwd", f"root:x:0:0:root:/root:/bin/sh\napp:x:{USER_ID}:{USER_ID}:app:/tmp:/bin/sh\n".encode())
    layer.file("etc/group", f"root:x:0:\napp:x:{USER_ID}:\n".encode())
    layer.directory("tmp", 0o1777)
    return image(layer.tar(), {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]})


@dataclass
class NodeSession:
    sandbox: NetworkSandbox
    registry: ChartRegistry
    node: RealNode
    network: ClusterNetwork
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

    @uninterruptible
    def stop(self) -> dict[str, list[str]]:
        """CoreDNS, kube-proxy, kube-router, the node; what is left of them (empty lists: nothing)."""
        self.network.stop()
        self.node.stop()
        self.network.remove_ipsets()
        return {k: v for k, v in {**self.node.leftovers(), **self.network.leftovers()}.items() if v}


@pytest.fixture(scope="session")
def node_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeSession]:
    node_host.preflight(tmp_path_factory.getbasetemp())
    net.preflight()
    times: dict[str, float] = {}
    sandbox = NetworkSandbox(tmp_path_factory.mktemp("node-sandbox"))
    if os.environ.get("SANDBOX_NO_BUILD") != "1":
        Builder(sandbox.versions).build(node=True)
    start = time.monotonic()
    with sandbox:
        times["sandbox start (control plane)"] = round(time.monotonic() - start, 1)
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
            session = NodeSession(sandbox, registry, node, ClusterNetwork(node, mirror), workdir, published, times)
            try:
                start = time.monotonic()
                session.node.start()
                times["node start (containerd, kubelet, Ready)"] = round(time.monotonic() - start, 1)
                session.network.start()
                times.update(session.network.times)
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
