"""Pods on a real node, as the node's own tests and the sandbox's scenarios create them directly (not through the
platform): a namespace ready for pods, a pod as the platform's runtimes run it, waiting for its end and its log."""

from __future__ import annotations

from typing import Any

from tests.e2e.node_session import USER_ID
from trainer_infra.sandbox.kube import KubeClient, wait_for

Obj = dict[str, Any]
#: the labels of a namespace that enforces PodSecurity ``restricted``
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def namespace(client: KubeClient, name: str, labels: dict[str, str] | None = None) -> None:
    """A namespace with its default ServiceAccount, which the kubelet's token volume needs (the
    kube-controller-manager creates it a moment after the namespace)."""
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    wait_for(f"the default ServiceAccount of {name}", lambda: client.get("v1", "ServiceAccount", "default", name), 60)


def restricted_pod(name: str, namespace: str, node: str, image: str, script: str) -> Obj:
    """A pod as the platform's runtimes run it: uid 1000, restricted, a writable emptyDir, read-only root."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
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


def finished(client: KubeClient, name: str, namespace: str) -> Obj | None:
    """The pod once it has ended (``Succeeded`` or ``Failed``), else None: a ``wait_for`` condition."""
    pod = client.get("v1", "Pod", name, namespace)
    return pod if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") else None


def labelled_pod(
    name: str, namespace: str, node: str, image: str, script: str, labels: dict[str, str], **spec: Any
) -> Obj:
    """``restricted_pod`` with ``labels``, more ``spec`` and no grace period (a server pod ends at once)."""
    pod = restricted_pod(name, namespace, node, image, script)
    pod["metadata"]["labels"] = labels
    pod["spec"].update(terminationGracePeriodSeconds=0, **spec)
    return pod


def log_when_done(client: KubeClient, name: str, namespace: str) -> str:
    """The log of the pod once it ended; it must have succeeded."""
    pod = wait_for(f"pod {namespace}/{name} to finish", lambda: finished(client, name, namespace), 180)
    log = client.log(name, namespace)
    assert pod["status"]["phase"] == "Succeeded", (pod["status"], log)
    return log
