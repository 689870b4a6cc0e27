"""A real node (kubelet + containerd + runc + CNI) beside the kwok nodes: a pod's image comes from the mirror that
``images.registryMirror`` names, its process really runs as uid 1000 and writes to an emptyDir (issue #28, the
first slice). Opt-in: ``make e2e-node`` (root; ``E2E_NODE=1``), see tests/e2e/README.md "A real node".
"""

from __future__ import annotations

import functools
import time
from typing import Any

from tests.e2e.node_session import NODE_MARKS, USER_ID, NodeSession
from tests.e2e.platform import node_ready
from tests.e2e.pods import RESTRICTED, finished, namespace, restricted_pod
from trainer_infra.core.images import mirror_image
from trainer_infra.sandbox.controller_images import build_all
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.node import MIRROR

pytestmark = NODE_MARKS

NAMESPACE = "node-e2e"
Obj = dict[str, Any]


def test_node_registers_beside_the_kwok_nodes(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    env.sandbox.create_kwok_node("kwok-beside-real", labels={"e2e.trainer-platform/pool": "kwok"})
    real = client.get("v1", "Node", env.node.name)
    info = real["status"]["nodeInfo"]
    assert info["kubeletVersion"] == f"v{env.sandbox.versions.kubernetes}"
    assert info["containerRuntimeVersion"].startswith("containerd://1.6."), info
    assert real["metadata"]["labels"]["e2e.trainer-platform/node"] == "real"
    assert {"type": "InternalIP", "address": env.node.node_ip} in real["status"]["addresses"]
    assert "kwok.x-k8s.io/node" not in real["metadata"].get("annotations", {}), "kwok must not manage the real node"
    wait_for("kwok to mark its node Ready", lambda: node_ready(client.get("v1", "Node", "kwok-beside-real")), 60)


SCRIPT = (
    "id; echo \"written by $(id -u)\" > /scratch/proof && cat /scratch/proof && stat -c 'owner %u mode %a' "
    "/scratch/proof; touch /not-allowed 2>/dev/null && echo 'root filesystem writable' || echo 'root filesystem "
    "read-only'"
)


def test_pod_pulls_from_the_mirror_and_runs_as_uid_1000(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    namespace(client, NAMESPACE, RESTRICTED)
    for attempt, label in ((1, "pod start, cold (image pulled)"), (2, "pod start, warm (image present)")):
        name = f"proof-{attempt}"
        start = time.monotonic()
        client.create(restricted_pod(name, NAMESPACE, env.node.name, env.busybox_ref(), SCRIPT))
        pod = wait_for(f"pod {name} to finish", functools.partial(finished, client, name, NAMESPACE), 120)
        env.times[label] = round(time.monotonic() - start, 1)
        status = pod["status"]["containerStatuses"][0]
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        assert status["state"]["terminated"]["exitCode"] == 0
        # what ran is exactly what was published, and it came from the mirror's reference
        env.assert_ran_from_mirror(pod)
        log = client.log(name, NAMESPACE)
        assert f"uid={USER_ID}(app) gid={USER_ID}(app)" in log, log
        assert f"written by {USER_ID}\nowner {USER_ID} mode 644" in log, log
        assert "root filesystem read-only" in log, log
    manifest_path = "/v2/" + env.busybox_ref().split("/", 1)[1].replace(":", "/manifests/")
    pulls = [r for r in env.registry.requests if r[1] == manifest_path and r[2] == 200]
    assert pulls, f"containerd never asked the e2e registry for {manifest_path}: {env.registry.requests}"


def test_image_missing_from_the_mirror_fails_naming_the_image(node_session: NodeSession) -> None:
    env = node_session
    client = env.sandbox.client
    namespace(client, NAMESPACE, RESTRICTED)
    missing = mirror_image("docker.io/library/busybox:0.0.0-not-mirrored", MIRROR)
    client.create(restricted_pod("not-mirrored", NAMESPACE, env.node.name, missing, "true"))

    def waiting() -> Obj | None:
        statuses = client.get("v1", "Pod", "not-mirrored", NAMESPACE).get("status", {}).get("containerStatuses", [])
        state = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return state if state.get("reason") in ("ErrImagePull", "ImagePullBackOff") and state.get("message") else None

    state = wait_for("the pull of a reference the mirror lacks to fail", waiting, 90)
    assert missing in state["message"], state
    refused = "/v2/" + missing.split("/", 1)[1].replace(":", "/manifests/")
    assert any(r[1] == refused and r[2] == 404 for r in env.registry.requests), env.registry.requests


def test_controller_images_run_as_the_charts_run_them(node_session: NodeSession) -> None:
    """Each chart controller's image (``controller_images.py``: JobSet, Kueue, Trainer, LWS, made from the binaries
    the e2e builds) pulled through the mirror under the chart's reference and started as the charts start it:
    ``command: [/manager]``, ``runAsNonRoot`` without a ``runAsUser`` (the kubelet refuses an image whose USER is not
    a numeric non-root id), a read-only root, no capabilities. ``--help`` stops it before it needs a cluster."""
    env = node_session
    client = env.sandbox.client
    namespace(client, NAMESPACE, RESTRICTED)
    images, built = build_all(env.sandbox.versions, env.sandbox.bin_dir)
    env.times.update(built)
    for index, (upstream, image) in enumerate(sorted(images.items())):
        ref = env.publish(upstream, image)
        pod = restricted_pod(f"controller-{index}", NAMESPACE, env.node.name, ref, "")
        spec = pod["spec"]
        spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
        container = spec["containers"][0]
        container.update(command=["/manager"], args=["--help"], volumeMounts=[])
        spec["volumes"] = []
        client.create(pod)
        name = pod["metadata"]["name"]
        done = wait_for(f"{upstream} to run", functools.partial(finished, client, name, NAMESPACE), 120)
        assert done["status"]["phase"] == "Succeeded", (upstream, done["status"])
        env.assert_ran_from_mirror(done)
        assert "config" in client.log(name, NAMESPACE), upstream  # its flags: the binary ran
