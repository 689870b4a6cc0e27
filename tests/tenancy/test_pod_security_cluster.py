"""Opt-in (`pytest -m cluster`, needs KUBECONFIG): Pod Security `baseline` admits an MPI/sshd node pod
shaped like the upstream deepspeed runtime, `restricted` rejects it. Not checkable offline: admission
runs in the API server."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.helpers import MINIMAL
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.namespaces import team_namespace

pytestmark = pytest.mark.cluster

SSHD_NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "mpi-node"},
    "spec": {
        "securityContext": {"fsGroup": 1000},
        "containers": [
            {
                "name": "node",
                "image": "ghcr.io/kubeflow/trainer/deepspeed-runtime",
                "command": ["/usr/sbin/sshd"],
                "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
                "ports": [{"containerPort": 2222}],
            }
        ],
    },
}


@pytest.mark.parametrize(("level", "admitted"), [("baseline", True), ("restricted", False)])
def test_pod_security_level_against_an_mpi_node_pod(level: str, admitted: bool) -> None:
    kubernetes = pytest.importorskip("kubernetes")
    try:
        kubernetes.config.load_kube_config()
    except Exception as exc:  # no cluster configured
        pytest.skip(f"no cluster: {exc}")
    name = f"psa-{level}-{uuid.uuid4().hex[:6]}"
    cfg = validate({**MINIMAL, "teams": [{"name": name, "podSecurity": level}]}).config
    team = cfg.teams[0]
    core = kubernetes.client.CoreV1Api()
    core.create_namespace(team_namespace(team, cfg.kubernetes.version, False).manifest)
    try:
        core.create_namespaced_pod(name, SSHD_NODE, dry_run="All")
        accepted = True
    except kubernetes.client.ApiException as exc:
        assert exc.status == 403 and "PodSecurity" in str(exc.body)
        accepted = False
    finally:
        core.delete_namespace(name)
    assert accepted is admitted
