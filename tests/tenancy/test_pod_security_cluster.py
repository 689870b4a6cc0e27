"""Opt-in (`pytest -m cluster`, needs KUBECONFIG): Pod Security `baseline` admits an MPI/sshd node pod
shaped like the upstream deepspeed runtime, `restricted` rejects it; `restricted` admits every pod of the
non-MPI runtimes as rendered. Admission runs in the API server (the sandbox e2e proves the same)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.helpers import MINIMAL, plan_of
from trainer_infra.catalog.security_context import is_mpi
from trainer_infra.manifests.runtime import pod_spec, replicated_jobs
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


@contextmanager
def team_namespace_at(level: str, prefix: str) -> Iterator[tuple[Any, Any, str]]:
    """(kubernetes module, CoreV1Api, namespace): a fresh namespace labelled as the render labels a team at
    `level`, deleted afterwards; skips without a cluster."""
    kubernetes = pytest.importorskip("kubernetes")
    try:
        kubernetes.config.load_kube_config()
    except Exception as exc:  # no cluster configured
        pytest.skip(f"no cluster: {exc}")
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cfg = validate({**MINIMAL, "teams": [{"name": name, "podSecurity": level}]}).config
    core = kubernetes.client.CoreV1Api()
    core.create_namespace(team_namespace(cfg.teams[0], cfg.kubernetes.version, False, {}).manifest)
    try:
        yield kubernetes, core, name
    finally:
        core.delete_namespace(name)


@pytest.mark.parametrize(("level", "admitted"), [("baseline", True), ("restricted", False)])
def test_pod_security_level_against_an_mpi_node_pod(level: str, admitted: bool) -> None:
    with team_namespace_at(level, f"psa-{level}") as (kubernetes, core, name):
        try:
            core.create_namespaced_pod(name, SSHD_NODE, dry_run="All")
            accepted = True
        except kubernetes.client.ApiException as exc:
            assert exc.status == 403 and "PodSecurity" in str(exc.body)
            accepted = False
    assert accepted is admitted


def test_restricted_admits_every_pod_of_the_non_mpi_runtimes() -> None:
    """Every pod template of every non-MPI runtime as rendered, created (dry run) in a `restricted` namespace of
    a real cluster. Admission only: whether the images start as that uid is for a real job to show."""
    refused = []
    with team_namespace_at("restricted", "psa-runtimes") as (kubernetes, core, name):
        for runtime in plan_of(MINIMAL).objects:
            if runtime.manifest["kind"] != "ClusterTrainingRuntime" or is_mpi(runtime.manifest):
                continue
            for job in replicated_jobs(runtime.manifest):
                pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": job["name"]}, "spec": pod_spec(job)}
                try:
                    core.create_namespaced_pod(name, pod, dry_run="All")
                except kubernetes.client.ApiException as exc:
                    refused.append(f"{runtime.manifest['metadata']['name']}/{job['name']}: {exc.body}")
    assert refused == []
