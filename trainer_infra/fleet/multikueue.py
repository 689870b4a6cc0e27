"""The objects that join clusters into one MultiKueue fleet. Pure: plain manifests from the fleet config.

Manager: one `AdmissionCheck` (controller `kueue.x-k8s.io/multikueue`) naming one `MultiKueueConfig` that
lists a `MultiKueueCluster` per worker, each reading its kubeconfig from a Secret in Kueue's namespace;
every team ClusterQueue carries the check (v1beta2 `admissionChecksStrategy`) and the workers' summed quota
on one plain ResourceFlavor per pool name (the manager runs no pods, so the flavors select no nodes).

Worker: the identity the manager acts as, with only what MultiKueue does there (Kueue's
create-multikueue-kubeconfig.sh lists it): read Workloads and the dispatched job kinds cluster-wide (its
watches are cluster-wide), create and delete them only in team namespaces, update Workload status there.
Job kinds follow the manager's Kueue integrations, so a disabled integration grants nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from trainer_infra.core.objects import ManagedObject, WorkerKubeconfig
from trainer_infra.core.quantity import format_quantity
from trainer_infra.manifests import meta
from trainer_infra.nodepools.labels import POOL_LABEL

CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
ADMISSION_CHECK = "multikueue"
CONFIG_NAME = "fleet"
ROLE = "trainer-platform-multikueue"
SERVICE_ACCOUNT = "multikueue"
FLEET_LABEL = "trainer-platform.io/fleet-cluster"
# Kueue integration → (API group, plural) of the job MultiKueue creates on a worker.
DISPATCHED = {
    "trainer.kubeflow.org/trainjob": ("trainer.kubeflow.org", "trainjobs"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
    "batch/job": ("batch", "jobs"),
}
RBAC = "rbac.authorization.k8s.io/v1"


def kubeconfig_secret_name(worker: str) -> str:
    return f"multikueue-{worker}"


def token_secret_name(generation: int) -> str:
    return f"multikueue-token-{generation}"


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _kinds(frameworks: Sequence[str]) -> list[tuple[str, str]]:
    return sorted({DISPATCHED[f] for f in frameworks if f in DISPATCHED})


def worker_read_rules(frameworks: Sequence[str]) -> list[dict[str, Any]]:
    rules = [
        _rule("kueue.x-k8s.io", ["workloads"], ["get", "list", "watch"]),
        _rule("kueue.x-k8s.io", ["workloads/status"], ["get"]),
    ]
    for group, plural in _kinds(frameworks):
        rules += [_rule(group, [plural], ["get", "list", "watch"]), _rule(group, [f"{plural}/status"], ["get"])]
    return rules


def worker_write_rules(frameworks: Sequence[str]) -> list[dict[str, Any]]:
    rules = [
        _rule("kueue.x-k8s.io", ["workloads"], ["create", "delete"]),
        _rule("kueue.x-k8s.io", ["workloads/status"], ["patch", "update"]),
    ]
    return rules + [_rule(group, [plural], ["create", "delete"]) for group, plural in _kinds(frameworks)]


def worker_auth_objects(
    kueue_namespace: str, team_namespaces: Sequence[str], frameworks: Sequence[str], generation: int
) -> list[ManagedObject]:
    """ServiceAccount, its read-only ClusterRole, a write Role per team namespace, and a token Secret
    (filled by the worker's token controller; a new generation is a new Secret, so rotating never edits
    a live token)."""
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": kueue_namespace}]
    objects = [
        ManagedObject(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta.metadata(SERVICE_ACCOUNT, kueue_namespace)}
        ),
        ManagedObject(
            {
                "apiVersion": RBAC,
                "kind": "ClusterRole",
                "metadata": meta.metadata(ROLE),
                "rules": worker_read_rules(frameworks),
            }
        ),
        ManagedObject(
            {
                "apiVersion": RBAC,
                "kind": "ClusterRoleBinding",
                "metadata": meta.metadata(ROLE),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
                "subjects": subject,
            }
        ),
        ManagedObject(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": meta.metadata(
                    token_secret_name(generation),
                    kueue_namespace,
                    annotations={"kubernetes.io/service-account.name": SERVICE_ACCOUNT},
                ),
            },
            after=(f"serviceaccount-{kueue_namespace}-{SERVICE_ACCOUNT}",),
        ),
    ]
    for ns in sorted(set(team_namespaces)):
        objects.append(
            ManagedObject(
                {
                    "apiVersion": RBAC,
                    "kind": "Role",
                    "metadata": meta.metadata(ROLE, ns),
                    "rules": worker_write_rules(frameworks),
                }
            )
        )
        objects.append(
            ManagedObject(
                {
                    "apiVersion": RBAC,
                    "kind": "RoleBinding",
                    "metadata": meta.metadata(ROLE, ns),
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
                    "subjects": subject,
                }
            )
        )
    return objects


def manager_objects(api: str, kueue_namespace: str, workers: Sequence[tuple[str, str, str]]) -> list[ManagedObject]:
    """`workers`: (name, API server URL, token Secret key in that worker's plan), preferred first."""
    check = {
        "apiVersion": api,
        "kind": "AdmissionCheck",
        "metadata": meta.metadata(ADMISSION_CHECK),
        "spec": {
            "controllerName": CONTROLLER_NAME,
            "parameters": {"apiGroup": api.split("/")[0], "kind": "MultiKueueConfig", "name": CONFIG_NAME},
        },
    }
    config = {
        "apiVersion": api,
        "kind": "MultiKueueConfig",
        "metadata": meta.metadata(CONFIG_NAME),
        "spec": {"clusters": [name for name, _, _ in workers]},
    }
    objects = [ManagedObject(check, replace_on_changes=("spec.controllerName",)), ManagedObject(config)]
    for name, server, token_key in workers:
        secret_name = kubeconfig_secret_name(name)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": meta.metadata(secret_name, kueue_namespace, labels={FLEET_LABEL: name}),
            "stringData": {"kubeconfig": WorkerKubeconfig(name, token_key, server, f"{name}-{SERVICE_ACCOUNT}")},
        }
        cluster = {
            "apiVersion": api,
            "kind": "MultiKueueCluster",
            "metadata": meta.metadata(name, labels={FLEET_LABEL: name}),
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name}}},
        }
        objects.append(ManagedObject(secret))
        objects.append(ManagedObject(cluster, after=(f"secret-{kueue_namespace}-{secret_name}",)))
    return objects


def manager_flavors(api: str, pools: Sequence[str]) -> list[ManagedObject]:
    return [
        ManagedObject(
            {
                "apiVersion": api,
                "kind": "ResourceFlavor",
                "metadata": meta.metadata(p, labels={POOL_LABEL: p}),
                "spec": {},
            }
        )
        for p in pools
    ]


def _q(res: str, value: Decimal) -> str:
    return format_quantity(value, binary=res == "memory")


def manager_resource_groups(
    pools: Sequence[str],
    covered: Sequence[str],
    nominal: dict[str, dict[str, Decimal]],
    limits: dict[str, dict[str, dict[str, Decimal]]],
) -> list[dict[str, Any]]:
    """One resource group over the pools' plain flavors. `nominal[pool][resource]` is already summed and
    capped; `limits[pool]["borrowingLimit"|"lendingLimit"][resource]` likewise."""
    flavors = []
    for pool in pools:
        resources = []
        for res in covered:
            entry: dict[str, Any] = {"name": res, "nominalQuota": _q(res, nominal.get(pool, {}).get(res, Decimal(0)))}
            for key in ("borrowingLimit", "lendingLimit"):
                value = limits.get(pool, {}).get(key, {}).get(res)
                if value is not None:
                    entry[key] = _q(res, value)
            resources.append(entry)
        flavors.append({"name": pool, "resources": resources})
    return [{"coveredResources": list(covered), "flavors": flavors}] if flavors else []


def with_admission_check(cluster_queue: dict[str, Any], resource_groups: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {
        **cluster_queue["spec"],
        "resourceGroups": resource_groups,
        "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
    }
    return {**cluster_queue, "spec": spec}
