"""Readiness probes: a component's health URL answers, a condition is True, a webhook is reachable through the
API server, the platform's admission policies are enforced."""

from __future__ import annotations

import ssl
import urllib.request
from typing import Any

from trainer_infra.manifests.runtime import TRAINER_API_VERSION, minimal_runtime
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.versions import JOBSET_GROUP, KUEUE_GROUP, VersionSet

Obj = dict[str, Any]


def has_condition(obj: Obj, cond_type: str) -> bool:
    return any(
        c.get("type") == cond_type and c.get("status") == "True" for c in obj.get("status", {}).get("conditions", [])
    )


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as r:
        return bool(r.status == 200)


def https_ok(url: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(url, timeout=2, context=ctx) as r:
        return bool(r.status == 200)


def webhook_probes(versions: VersionSet) -> dict[str, Obj]:
    """Per component, an object whose dry-run create goes through its webhook (the sandbox's own names)."""
    return {
        "jobset": probe_jobset(versions.api_version(JOBSET_GROUP)),
        "kueue": {
            "apiVersion": versions.api_version(KUEUE_GROUP),
            "kind": "ResourceFlavor",
            "metadata": {"name": "e2e-webhook-probe"},
        },
        "trainer": probe_runtime(),
        "lws": probe_lws(),
    }


def probe_jobset(api_version: str) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "JobSet",
        "metadata": {"name": "e2e-webhook-probe", "namespace": "default"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                            }
                        }
                    },
                }
            ]
        },
    }


def probe_lws() -> Obj:
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "e2e-webhook-probe", "namespace": "default"},
        "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": pod}},
    }


def probe_runtime() -> Obj:
    """Schema-valid, so the API server gets as far as the validating webhook."""
    return minimal_runtime("e2e-webhook-probe", {"image": "busybox"})


def wait_admission_enforced(client: KubeClient, namespace: str, timeout: float = 60) -> None:
    """Until the API server's admission plugin refuses, with the platform's own message, a TrainJob in
    ``namespace`` that mounts a hostPath and names no queue. A policy is served (even type-checked) a moment before
    the plugin enforces it; a test that attacks first would otherwise see the attack pass."""
    pod = {"volumes": [{"name": "host", "hostPath": {"path": "/"}}]}
    replicated = [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]
    probe = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "admission-probe", "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "runtimePatches": [
                {
                    "manager": "example.com/probe",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
                }
            ],
        },
    }

    def refused() -> bool:
        try:
            client.create(probe, dry_run=True)
        except ApiError as exc:
            return "refused:" in exc.message
        return False

    wait_for(f"the tenancy admission policies to be enforced in {namespace}", refused, timeout)
