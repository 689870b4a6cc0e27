"""The objects that join clusters into one MultiKueue fleet. Pure: plain manifests from the fleet config.

Manager: one `AdmissionCheck` (controller `kueue.x-k8s.io/multikueue`) naming one `MultiKueueConfig` that
lists a `MultiKueueCluster` per worker, each reading its kubeconfig from a Secret in Kueue's namespace;
every team ClusterQueue carries the check (v1beta2 `admissionChecksStrategy`) and the workers' quota on one
plain ResourceFlavor per worker pool (the manager runs no pods, so the flavors select no nodes).

Worker: the identity the manager acts as, with only what MultiKueue does there (Kueue's
create-multikueue-kubeconfig.sh lists it): read Workloads and the dispatched job kinds cluster-wide (its
watches are cluster-wide), create and delete them only in team namespaces, update Workload status there.
Job kinds follow the manager's Kueue integrations, so a disabled integration grants nothing.

Leaving the fleet: Kueue evicts at once every workload admitted on a cluster dropped from the
MultiKueueConfig ("Admitting remote no longer exists", pkg/controller/admissionchecks/multikueue/workload.go)
while the job keeps running on the worker. So a worker is first drained (its ClusterQueues hold, it stays
in the MultiKueueConfig so its running jobs keep reporting), and a policy on the manager refuses to drop a
cluster from the MultiKueueConfig, or delete its MultiKueueCluster, unless the stored object marks it draining.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainer_infra.core.objects import ManagedObject, WorkerKubeconfig
from trainer_infra.core.upstream import jobset, kubernetes, kueue, trainer
from trainer_infra.manifests import meta
from trainer_infra.nodepools.labels import POOL_LABEL

ADMISSION_CHECK = "multikueue"
CONFIG_NAME = "fleet"
ROLE = "trainer-platform-multikueue"
SERVICE_ACCOUNT = "multikueue"
FLEET_LABEL = "trainer-platform.io/fleet-cluster"
DRAINING = "trainer-platform.io/draining"  # MultiKueueConfig annotation (comma-separated), MultiKueueCluster label
REMOVAL_POLICY = "trainer-platform-fleet-drain-first"
# Kueue integration → (API group, plural) of the job MultiKueue creates on a worker.
DISPATCHED = {
    kueue.TRAINJOB_FRAMEWORK: (trainer.GROUP, "trainjobs"),
    kueue.JOBSET_FRAMEWORK: (jobset.GROUP, "jobsets"),
    kueue.BATCH_JOB_FRAMEWORK: ("batch", "jobs"),
}


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
        _rule(kueue.GROUP, ["workloads"], ["get", "list", "watch"]),
        _rule(kueue.GROUP, ["workloads/status"], ["get"]),
    ]
    for group, plural in _kinds(frameworks):
        rules += [_rule(group, [plural], ["get", "list", "watch"]), _rule(group, [f"{plural}/status"], ["get"])]
    return rules


def worker_write_rules(frameworks: Sequence[str]) -> list[dict[str, Any]]:
    rules = [
        _rule(kueue.GROUP, ["workloads"], ["create", "delete"]),
        _rule(kueue.GROUP, ["workloads/status"], ["patch", "update"]),
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
                "apiVersion": kubernetes.RBAC_API,
                "kind": "ClusterRole",
                "metadata": meta.metadata(ROLE),
                "rules": worker_read_rules(frameworks),
            }
        ),
        ManagedObject(
            {
                "apiVersion": kubernetes.RBAC_API,
                "kind": "ClusterRoleBinding",
                "metadata": meta.metadata(ROLE),
                "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": "ClusterRole", "name": ROLE},
                "subjects": subject,
            }
        ),
        ManagedObject(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": kubernetes.SERVICE_ACCOUNT_TOKEN_TYPE,
                "metadata": meta.metadata(
                    token_secret_name(generation),
                    kueue_namespace,
                    annotations={kubernetes.SERVICE_ACCOUNT_NAME_ANNOTATION: SERVICE_ACCOUNT},
                ),
            },
            after=(f"serviceaccount-{kueue_namespace}-{SERVICE_ACCOUNT}",),
        ),
    ]
    for ns in sorted(set(team_namespaces)):
        objects.append(
            ManagedObject(
                {
                    "apiVersion": kubernetes.RBAC_API,
                    "kind": "Role",
                    "metadata": meta.metadata(ROLE, ns),
                    "rules": worker_write_rules(frameworks),
                }
            )
        )
        objects.append(
            ManagedObject(
                {
                    "apiVersion": kubernetes.RBAC_API,
                    "kind": "RoleBinding",
                    "metadata": meta.metadata(ROLE, ns),
                    "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": "Role", "name": ROLE},
                    "subjects": subject,
                }
            )
        )
    return objects


def manager_objects(
    api: str, kueue_namespace: str, workers: Sequence[tuple[str, str, str, bool]]
) -> list[ManagedObject]:
    """`workers`: (name, API server URL, token Secret key in that worker's plan, draining), preferred first.
    Draining workers stay listed (their running jobs keep reporting) and are marked for the removal policy."""
    check = {
        "apiVersion": api,
        "kind": "AdmissionCheck",
        "metadata": meta.metadata(ADMISSION_CHECK),
        "spec": {
            "controllerName": kueue.MULTIKUEUE_CONTROLLER,
            "parameters": {"apiGroup": api.split("/")[0], "kind": "MultiKueueConfig", "name": CONFIG_NAME},
        },
    }
    draining = [name for name, _, _, drain in workers if drain]
    config = {
        "apiVersion": api,
        "kind": "MultiKueueConfig",
        "metadata": meta.metadata(CONFIG_NAME, annotations={DRAINING: ",".join(draining)} if draining else None),
        "spec": {"clusters": [name for name, _, _, _ in workers]},
    }
    objects = [
        ManagedObject(check, replace_on_changes=("spec.controllerName",)),
        ManagedObject(config, after=(f"validatingadmissionpolicybinding-{REMOVAL_POLICY}",)),
        *(ManagedObject(o) for o in removal_policy(api.split("/")[0])),
    ]
    for name, server, token_key, drain in workers:
        secret_name = kubeconfig_secret_name(name)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": meta.metadata(secret_name, kueue_namespace, labels={FLEET_LABEL: name}),
            "stringData": {"kubeconfig": WorkerKubeconfig(name, token_key, server, f"{name}-{SERVICE_ACCOUNT}")},
        }
        labels = {FLEET_LABEL: name, **({DRAINING: "true"} if drain else {})}
        cluster = {
            "apiVersion": api,
            "kind": "MultiKueueCluster",
            "metadata": meta.metadata(name, labels=labels),
            "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name}}},
        }
        objects.append(ManagedObject(secret))
        objects.append(ManagedObject(cluster, after=(f"secret-{kueue_namespace}-{secret_name}",)))
    return objects


def _was_draining(obj: str) -> str:
    return (
        f"has({obj}.metadata.annotations) && '{DRAINING}' in {obj}.metadata.annotations && "
        f"c in {obj}.metadata.annotations['{DRAINING}'].split(',')"
    )


def removal_policy(group: str) -> list[dict[str, Any]]:
    """Drain first: the API server refuses to drop a worker from the MultiKueueConfig, or to delete its
    MultiKueueCluster, unless the stored object (the last `pulumi up`) already marked it draining."""
    rules = [
        {"apiGroups": [group], "apiVersions": ["*"], "operations": ["UPDATE"], "resources": ["multikueueconfigs"]},
        {"apiGroups": [group], "apiVersions": ["*"], "operations": ["DELETE"], "resources": ["multikueueclusters"]},
    ]
    hint = "set draining: true on the worker, pulumi up, wait until no job runs there, then remove it"
    validations = [
        {
            "expression": "request.resource.resource != 'multikueueconfigs' || oldObject.metadata.name != "
            f"'{CONFIG_NAME}' || oldObject.spec.clusters.all(c, c in object.spec.clusters || "
            f"({_was_draining('oldObject')}))",
            "messageExpression": "'worker(s) ' + oldObject.spec.clusters.filter(c, !(c in object.spec.clusters) && "
            f"!({_was_draining('oldObject')})).join(', ') + ' removed from the fleet without draining first: "
            f"their running jobs would be evicted; {hint}'",
            "message": f"a worker was removed from the fleet without draining first; {hint}",
            "reason": "Forbidden",
        },
        {
            "expression": "request.resource.resource != 'multikueueclusters' || !has(oldObject.metadata.labels) || "
            f"!('{FLEET_LABEL}' in oldObject.metadata.labels) || "
            f"('{DRAINING}' in oldObject.metadata.labels && oldObject.metadata.labels['{DRAINING}'] == 'true')",
            "messageExpression": "'worker ' + oldObject.metadata.name + ' is not draining: its running jobs would be "
            f"evicted; {hint}'",
            "message": f"the worker is not draining; {hint}",
            "reason": "Forbidden",
        },
    ]
    return [
        {
            "apiVersion": kubernetes.ADMISSION_API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": meta.metadata(REMOVAL_POLICY),
            "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules}, "validations": validations},
        },
        {
            "apiVersion": kubernetes.ADMISSION_API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": meta.metadata(REMOVAL_POLICY),
            "spec": {"policyName": REMOVAL_POLICY, "validationActions": ["Deny"]},
        },
    ]


def hold(cluster_queue: dict[str, Any]) -> dict[str, Any]:
    """A draining worker's queue: admits nothing new, lets admitted workloads finish (Kueue `stopPolicy`)."""
    return {**cluster_queue, "spec": {**cluster_queue["spec"], "stopPolicy": "Hold"}}


def manager_flavor_name(worker: str, pool: str) -> str:
    """`<worker>.<pool>`: both are DNS labels, so the dot keeps every pair distinct (a dash would not)."""
    return f"{worker}.{pool}"


def manager_flavors(api: str, flavors: Sequence[tuple[str, str]]) -> list[ManagedObject]:
    """One plain flavor per (worker, pool): the manager runs no pods, so the flavors select no nodes."""
    return [
        ManagedObject(
            {
                "apiVersion": api,
                "kind": "ResourceFlavor",
                "metadata": meta.metadata(
                    manager_flavor_name(worker, pool), labels={POOL_LABEL: pool, FLEET_LABEL: worker}
                ),
                "spec": {},
            }
        )
        for worker, pool in flavors
    ]


def with_admission_check(cluster_queue: dict[str, Any], resource_groups: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {
        **cluster_queue["spec"],
        "resourceGroups": resource_groups,
        "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
    }
    return {**cluster_queue, "spec": spec}
