"""Opt-in (`pytest -m cluster`, needs KUBECONFIG of a cluster whose CNI enforces NetworkPolicy): the team
NetworkPolicies really cut other teams off and really let a job's own pods talk. The e2e sandbox has no CNI
(kwok runs no containers), so enforcement can only be proven here. Pulls `busybox`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from trainer_infra.manifests.meta import TEAM_LABEL
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.tenancy.network import NetworkSettings, network_policies

pytestmark = pytest.mark.cluster
IMAGE = "busybox:1.37"


def _pod(name: str, job: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {JOBSET_NAME_LABEL: job}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": IMAGE, "command": command}]},
    }


@pytest.fixture
def cluster() -> Iterator[tuple[Any, list[str]]]:
    kubernetes = pytest.importorskip("kubernetes")
    try:
        kubernetes.config.load_kube_config()
    except Exception as exc:  # no cluster configured
        pytest.skip(f"no cluster: {exc}")
    core = kubernetes.client.CoreV1Api()
    net = kubernetes.client.NetworkingV1Api()
    suffix = uuid.uuid4().hex[:5]
    namespaces = [f"netpol-a-{suffix}", f"netpol-b-{suffix}"]
    for ns in namespaces:
        core.create_namespace({"metadata": {"name": ns, "labels": {TEAM_LABEL: ns}}})
        for policy in network_policies(ns, ns, NetworkSettings()):
            net.create_namespaced_network_policy(ns, policy)
    try:
        yield core, namespaces
    finally:
        for ns in namespaces:
            core.delete_namespace(ns)


def _ip_when_running(core: Any, ns: str, name: str) -> str:
    for _ in range(120):
        pod = core.read_namespaced_pod(name, ns)
        if pod.status.phase == "Running" and pod.status.pod_ip:
            return str(pod.status.pod_ip)
        time.sleep(1)
    raise TimeoutError(f"{ns}/{name} not Running")


def _reaches(core: Any, ns: str, job: str, url: str) -> bool:
    name = f"client-{uuid.uuid4().hex[:5]}"
    core.create_namespaced_pod(ns, _pod(name, job, ["wget", "-q", "-T", "5", "-O", "/dev/null", url]))
    for _ in range(120):
        phase = core.read_namespaced_pod(name, ns).status.phase
        if phase in ("Succeeded", "Failed"):
            return bool(phase == "Succeeded")
        time.sleep(1)
    raise TimeoutError(f"{ns}/{name} did not finish")


def test_same_job_pods_talk_other_teams_and_metadata_do_not(cluster: tuple[Any, list[str]]) -> None:
    core, (team_a, team_b) = cluster
    core.create_namespaced_pod(team_a, _pod("server", "job-a", ["httpd", "-f", "-p", "8080"]))
    ip = _ip_when_running(core, team_a, "server")
    assert _reaches(core, team_a, "job-a", f"http://{ip}:8080/"), "pods of one team's job must reach each other"
    assert not _reaches(core, team_b, "job-b", f"http://{ip}:8080/"), "another team reached the pod"
    assert not _reaches(core, team_a, "job-a", "http://169.254.169.254/"), "cloud metadata reachable"
