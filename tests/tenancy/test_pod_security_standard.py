"""The port of PodSecurity admission's `restricted` level (trainer_infra/manifests/pod_security_standards.py)
against the rules of k8s.io/pod-security-admission v0.34 `policy/check_*.go`: one compliant pod, then one change
per rule that upstream refuses (or, where upstream allows it, accepts). The sandbox e2e runs the real admission."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainer_infra.manifests.pod_security_standards import restricted_problems

RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
COMPLIANT: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
    "initContainers": [{"name": "init", "image": "x:1", "securityContext": dict(RESTRICTED_CONTAINER)}],
    "containers": [{"name": "node", "image": "x:1", "securityContext": dict(RESTRICTED_CONTAINER)}],
    "volumes": [{"name": "w", "persistentVolumeClaim": {"claimName": "workspace"}}, {"name": "h", "emptyDir": {}}],
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """COMPLIANT with one field set (`containers.0.securityContext.runAsUser`); None deletes it."""
    pod = copy.deepcopy(COMPLIANT)
    *parents, last = path.split(".")
    node: Any = pod
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return pod


def test_a_compliant_pod_passes() -> None:
    assert restricted_problems(COMPLIANT) == []


@pytest.mark.parametrize(
    ("path", "value", "rule"),
    [
        ("securityContext.runAsNonRoot", None, "runAsNonRoot != true"),  # neither pod nor container says true
        ("securityContext.runAsNonRoot", False, "runAsNonRoot != true"),
        ("containers.0.securityContext.runAsNonRoot", False, "runAsNonRoot != true"),  # overrides the pod's true
        ("securityContext.runAsUser", 0, "runAsUser=0"),
        ("initContainers.0.securityContext.runAsUser", 0, "runAsUser=0"),
        ("securityContext.seccompProfile", None, "seccompProfile"),
        ("containers.0.securityContext.seccompProfile", {"type": "Unconfined"}, "seccompProfile"),
        ("initContainers.0.securityContext.allowPrivilegeEscalation", None, "allowPrivilegeEscalation"),
        ("containers.0.securityContext.capabilities", {"drop": ["NET_RAW"]}, "must drop ALL"),
        ("containers.0.securityContext.capabilities", {"drop": ["ALL"], "add": ["CHOWN"]}, "adds CHOWN"),
        ("containers.0.securityContext.privileged", True, "privileged"),
        ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}], "hostPort"),
        ("containers.0.readinessProbe", {"httpGet": {"host": "10.0.0.1", "port": 80}}, "host probes"),
        ("containers.0.securityContext.procMount", "Unmasked", "procMount"),
        ("containers.0.securityContext.seLinuxOptions", {"type": "spc_t"}, "seLinuxOptions"),
        ("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}], "sysctls"),
        ("hostNetwork", True, "host namespaces"),
        ("hostPID", True, "host namespaces"),
        ("volumes", [{"name": "d", "nfs": {"server": "x", "path": "/"}}], "restricted volume types"),
        ("volumes", [{"name": "d", "hostPath": {"path": "/"}}], "restricted volume types"),
    ],
)
def test_each_rule_refuses(path: str, value: Any, rule: str) -> None:
    problems = restricted_problems(changed(path, value))
    assert any(rule in p for p in problems), problems


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("containers.0.securityContext.capabilities", {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
        ("containers.0.securityContext.runAsNonRoot", True),  # container-level true, pod-level unset
        ("volumes", [{"name": "c", "csi": {"driver": "x"}}, {"name": "p", "projected": {"sources": []}}]),
        ("securityContext.sysctls", [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]),
        ("containers.0.securityContext.seccompProfile", {"type": "Localhost", "localhostProfile": "p.json"}),
    ],
)
def test_what_upstream_allows_passes(path: str, value: Any) -> None:
    assert restricted_problems(changed(path, value)) == []


def test_container_level_settings_replace_the_pod_level_ones() -> None:
    pod = changed("securityContext.runAsNonRoot", None)
    for c in pod["initContainers"] + pod["containers"]:
        c["securityContext"]["runAsNonRoot"] = True
    assert restricted_problems(pod) == []
