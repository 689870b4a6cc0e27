"""A real node (kubelet + containerd + runc + CNI) beside the kwok nodes: a pod's image comes from the mirror that
``images.registryMirror`` names, its process really runs as uid 1000 and writes to an emptyDir (issue #28, the
first slice). Opt-in: ``make e2e-node`` (root; ``E2E_NODE=1``), see tests/e2e/README.md "A real node".
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import node as node_mod
from tests.e2e.build import Builder
from tests.e2e.chart_registry import ChartRegistry
from tests.e2e.controller_images import CONTROLLER_BINARIES, build_all
from tests.e2e.kube import ApiError, KubeClient, wait_for
from tests.e2e.node import MIRROR, NodeSandbox, RealNode, publish
from tests.e2e.oci_images import USER_ID, Image, busybox_image, busybox_version, pause_image
from tests.e2e.sandbox import Sandbox
from trainer_infra.core.images import mirror_image

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_NODE") != "1", reason="the real node is opt-in: make e2e-node (E2E_NODE=1)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the real node needs root (containerd, runc, mounts, cgroups)"),
]

NAMESPACE = "node-e2e"
Obj = dict[str, Any]


@dataclass
class Env:
    sandbox: Sandbox
    registry: ChartRegistry
    node: RealNode
    busybox: Image
    busybox_ref: str
    times: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    node_mod.preflight()
    times: dict[str, float] = {}
    sandbox = NodeSandbox(tmp_path_factory.mktemp("sandbox"))
    if os.environ.get("E2E_NO_BUILD") != "1":
        Builder(sandbox.versions).build(only={*node_mod.NODE_SANDBOX_BINARIES, *CONTROLLER_BINARIES})
    with sandbox:
        sandbox.create_kwok_node("kwok-beside-real", labels={"e2e.trainer-platform/pool": "kwok"})
        cert = sandbox.ca.issue("registry", "e2e-registry", hosts=("127.0.0.1",))
        with ChartRegistry([], cert=cert.cert, key=cert.key) as registry:
            start = time.monotonic()
            busybox = busybox_image()
            pause = pause_image(Builder(sandbox.versions).binary("pause"))
            times["images built (busybox, pause)"] = round(time.monotonic() - start, 2)
            busybox_ref = publish(registry, f"docker.io/library/busybox:{busybox_version()}", busybox)
            pause_ref = publish(registry, node_mod.PAUSE_IMAGE, pause)
            node = RealNode(
                sandbox,
                tmp_path_factory.mktemp("node"),
                registry_hosts={MIRROR.split("/")[0]: f"https://{registry.host}"},
                registry_ca=sandbox.ca.cert_path,
                sandbox_image=pause_ref,
            )
            start = time.monotonic()
            node.start()
            times["node start (containerd, kubelet, Ready)"] = round(time.monotonic() - start, 1)
            times["of which containerd serving"] = node.times.containerd
            times["of which kubelet to Node Ready"] = node.times.kubelet_ready
            try:
                yield Env(sandbox, registry, node, busybox, busybox_ref, times)
            finally:
                node.stop()
                print(f"\n[node] measured: {times}", flush=True)


def test_node_registers_beside_the_kwok_nodes(env: Env) -> None:
    client = env.sandbox.client
    real = client.get("v1", "Node", env.node.name)
    info = real["status"]["nodeInfo"]
    assert info["kubeletVersion"] == f"v{env.sandbox.versions.kubernetes}"
    assert info["containerRuntimeVersion"].startswith("containerd://1.6."), info
    assert real["metadata"]["labels"]["e2e.trainer-platform/node"] == "real"
    assert {"type": "InternalIP", "address": env.node.node_ip} in real["status"]["addresses"]
    assert "kwok.x-k8s.io/node" not in real["metadata"].get("annotations", {}), "kwok must not manage the real node"
    kwok = client.get("v1", "Node", "kwok-beside-real")
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in kwok["status"]["conditions"])


def _restricted_namespace(client: KubeClient) -> None:
    client.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        }
    )
    # the kube-controller-manager creates it; the kubelet's token volume needs it
    wait_for("the default ServiceAccount", lambda: client.get("v1", "ServiceAccount", "default", NAMESPACE), 60)


def _pod(name: str, node: str, image: str, script: str) -> Obj:
    """A pod as the platform's runtimes run it: uid 1000, restricted, a writable emptyDir, read-only root."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": USER_ID,
                "runAsGroup": USER_ID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "command": ["/bin/sh", "-c", script],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }


def _finished(client: KubeClient, name: str) -> Obj | None:
    pod = client.get("v1", "Pod", name, NAMESPACE)
    return pod if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") else None


SCRIPT = (
    "id; echo \"written by $(id -u)\" > /scratch/proof && cat /scratch/proof && stat -c 'owner %u mode %a' "
    "/scratch/proof; touch /not-allowed 2>/dev/null && echo 'root filesystem writable' || echo 'root filesystem "
    "read-only'"
)


def test_pod_pulls_from_the_mirror_and_runs_as_uid_1000(env: Env) -> None:
    client = env.sandbox.client
    _restricted_namespace(client)
    for attempt, label in ((1, "pod start, cold (image pulled)"), (2, "pod start, warm (image present)")):
        name = f"proof-{attempt}"
        start = time.monotonic()
        client.create(_pod(name, env.node.name, env.busybox_ref, SCRIPT))
        pod = wait_for(f"pod {name} to finish", functools.partial(_finished, client, name), 120)
        env.times[label] = round(time.monotonic() - start, 1)
        status = pod["status"]["containerStatuses"][0]
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert status["state"]["terminated"]["exitCode"] == 0
        # what ran is exactly what was published, and it came from the mirror's reference
        assert status["image"] == env.busybox_ref
        assert status["imageID"] == f"{env.busybox_ref.rsplit(':', 1)[0]}@{env.busybox.digest}", status
        log = client.log(name, NAMESPACE)
        assert f"uid={USER_ID}(app) gid={USER_ID}(app)" in log, log
        assert f"written by {USER_ID}\nowner {USER_ID} mode 644" in log, log
        assert "root filesystem read-only" in log, log
    manifest_path = "/v2/" + env.busybox_ref.split("/", 1)[1].replace(":", "/manifests/")
    pulls = [r for r in env.registry.requests if r[1] == manifest_path and r[2] == 200]
    assert pulls, f"containerd never asked the e2e registry for {manifest_path}: {env.registry.requests}"


def test_image_missing_from_the_mirror_fails_naming_the_image(env: Env) -> None:
    client = env.sandbox.client
    _restricted_namespace(client)
    missing = mirror_image("docker.io/library/busybox:0.0.0-not-mirrored", MIRROR)
    client.create(_pod("not-mirrored", env.node.name, missing, "true"))

    def waiting() -> Obj | None:
        statuses = client.get("v1", "Pod", "not-mirrored", NAMESPACE).get("status", {}).get("containerStatuses", [])
        state = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return state if state.get("reason") in ("ErrImagePull", "ImagePullBackOff") and state.get("message") else None

    state = wait_for("the pull of a reference the mirror lacks to fail", waiting, 90)
    assert missing in state["message"], state
    refused = "/v2/" + missing.split("/", 1)[1].replace(":", "/manifests/")
    assert any(r[1] == refused and r[2] == 404 for r in env.registry.requests), env.registry.requests


def test_controller_images_run_as_the_charts_run_them(env: Env) -> None:
    """Each chart controller's image (``controller_images.py``: JobSet, Kueue, Trainer, LWS, made from the binaries
    the e2e builds) pulled through the mirror under the chart's reference and started as the charts start it:
    ``command: [/manager]``, ``runAsNonRoot`` without a ``runAsUser`` (the kubelet refuses an image whose USER is not
    a numeric non-root id), a read-only root, no capabilities. ``--help`` stops it before it needs a cluster."""
    client = env.sandbox.client
    _restricted_namespace(client)
    images, built = build_all(env.sandbox.versions, env.sandbox.bin_dir)
    env.times.update(built)
    for index, (upstream, image) in enumerate(sorted(images.items())):
        ref = publish(env.registry, upstream, image)
        pod = _pod(f"controller-{index}", env.node.name, ref, "")
        spec = pod["spec"]
        spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        container = spec["containers"][0]
        container.update(command=["/manager"], args=["--help"], volumeMounts=[])
        spec["volumes"] = []
        client.create(pod)
        name = pod["metadata"]["name"]
        done = wait_for(f"{upstream} to run", functools.partial(_finished, client, name), 120)
        status = done["status"]["containerStatuses"][0]
        assert done["status"]["phase"] == "Succeeded", (upstream, done["status"])
        assert status["imageID"] == f"{ref.rsplit(':', 1)[0]}@{image.digest}", status
        assert "config" in client.log(name, NAMESPACE), upstream  # its flags: the binary ran


def test_teardown_leaves_nothing_behind(env: Env) -> None:
    """Last in this file: stop the node with pods on it (one finished, one failing to pull) and look for traces."""
    client = env.sandbox.client
    assert env.node.tasks(), "expected the pods' sandboxes to be running before the teardown"
    start = time.monotonic()
    env.node.stop()
    env.times["node stop"] = round(time.monotonic() - start, 1)
    left = {kind: found for kind, found in env.node.leftovers().items() if found}
    assert not left, f"the real node left {left}"
    try:
        pods = client.list("v1", "Pod", NAMESPACE)
    except ApiError:
        pods = []
    assert not pods, [p["metadata"]["name"] for p in pods]
    assert Path(env.node.workdir).exists()  # the work directory (logs) stays for a post-mortem
