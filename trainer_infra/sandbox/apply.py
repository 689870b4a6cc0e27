"""Apply a render's objects to a running control plane, and start its Kueue with the render's scheduling
settings (shared by `simulate` and the sandbox's render.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainer_infra.components.identity import chart_name, service_account_username
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for

Obj = dict[str, Any]


class ApplyError(RuntimeError):
    """Objects of the render that the API server refused (each named with the reason)."""


#: Apply order inside each scope: what others refer to comes first.
_KIND_ORDER = [
    "Namespace",
    "CustomResourceDefinition",
    "PriorityClass",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "Node",
    "ResourceFlavor",
    "Topology",
    "Cohort",
    "WorkloadPriorityClass",
    "AdmissionCheck",
    "ClusterQueue",
    "ClusterTrainingRuntime",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ResourceQuota",
    "LimitRange",
    "LocalQueue",
    "TrainingRuntime",
]


#: Keys of the render's Kueue manager config that change scheduling; process settings (ports, leader
#: election, certificates) stay the sandbox's own.
KUEUE_BEHAVIOUR_KEYS = (
    "fairSharing",
    "admissionFairSharing",
    "waitForPodsReady",
    "resources",
    "integrations",
    "multiKueue",
)
#: Keys of the manager config's `metrics` block that change which metrics Kueue exports.
KUEUE_METRIC_KEYS = ("enableClusterQueueResources", "localQueueMetrics", "customLabels")


def kueue_settings(helm_releases: list[Obj]) -> Obj:
    """The render's Kueue behaviour (manager config keys above + feature gates) for the sandbox's Kueue.

    Without this the sandbox would schedule with Kueue's defaults, e.g. without the fair sharing
    the stack turns on, and preemption would differ from the cluster's.
    """
    release = next((r for r in helm_releases if "kueue" in str(r.get("chart", "")).lower()), None)
    if release is None:
        return {}
    values = release.get("values") or {}
    manager = yaml.safe_load(values.get("managerConfig", {}).get("controllerManagerConfigYaml") or "{}") or {}
    settings: Obj = {k: manager[k] for k in KUEUE_BEHAVIOUR_KEYS if k in manager}
    # what the render's metrics report (not where they are served: the sandbox picks the port)
    metric_settings = {k: v for k, v in (manager.get("metrics") or {}).items() if k in KUEUE_METRIC_KEYS}
    if metric_settings:
        settings["metrics"] = metric_settings
    gates = values.get("controllerManager", {}).get("featureGates") or []
    if gates:
        settings["featureGates"] = {g["name"]: bool(g["enabled"]) for g in gates}
    return settings


def apply_order(client: KubeClient, objects: list[Obj]) -> list[Obj]:
    """Namespaces, then other cluster-scoped objects, then namespaced ones; kind order inside."""

    def key(obj: Obj) -> tuple[int, int, str]:
        kind = obj["kind"]
        if kind == "Namespace":
            scope = 0
        else:
            try:
                scope = 2 if client.resource(obj["apiVersion"], kind).namespaced else 1
            except ApiError:
                scope = 3  # unknown kind: applied last, where its error will be reported
        rank = _KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER)
        return scope, rank, str(obj["metadata"].get("name", ""))

    return sorted(objects, key=key)


def apply_objects(client: KubeClient, objects: list[Obj], *, field_manager: str = "trainer-platform") -> list[Obj]:
    """Server-side apply each object (strict); raise one error listing every failure."""
    applied: list[Obj] = []
    failures: list[str] = []
    for obj in apply_order(client, objects):
        ident = f"{obj['kind']} {obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}".replace(" /", " ")
        try:
            applied.append(client.apply(obj, field_manager=field_manager))
        except ApiError as exc:
            failures.append(f"{ident}: {exc}")
    if failures:
        raise ApplyError("server-side apply (strict) failed for:\n  " + "\n  ".join(failures))
    return applied


def bind_claims(client: KubeClient, claims: list[Obj], volume_root: Path | None = None) -> None:
    """Give every PersistentVolumeClaim a pre-bound PersistentVolume: the sandbox has no provisioner.

    Without them pods using the claims would stay unschedulable. The PV copies the claim's class, access modes
    and size. Its hostPath is ``<volume_root>/<namespace>/<claim>`` (the caller prepares those directories as
    the export a real class would provide): what a real node's kubelet mounts; without ``volume_root`` a path
    that does not exist (nothing mounts it: kwok runs no containers).
    """
    for pvc in claims:
        meta, spec = pvc["metadata"], pvc.get("spec", {})
        size = spec.get("resources", {}).get("requests", {}).get("storage", "1Gi")
        pv: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": f"e2e-{meta['namespace']}-{meta['name']}",
                "labels": {"e2e.trainer-platform/fake": "pv" if volume_root is None else "host-directory"},
            },
            "spec": {
                "capacity": {"storage": size},
                "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Retain",
                "hostPath": {"path": str((volume_root or Path("/nonexistent/e2e")) / meta["namespace"] / meta["name"])},
                "claimRef": {"namespace": meta["namespace"], "name": meta["name"]},
            },
        }
        if spec.get("storageClassName"):
            pv["spec"]["storageClassName"] = spec["storageClassName"]
        client.apply(pv, field_manager="trainer-platform-e2e")


def wait_nodes_ready(client: KubeClient, nodes: list[str], timeout: float = 90) -> None:
    """Until kwok reports every named Node Ready."""

    def ready() -> bool:
        for name in nodes:
            conds = client.get("v1", "Node", name).get("status", {}).get("conditions", [])
            if not any(c["type"] == "Ready" and c["status"] == "True" for c in conds):
                return False
        return True

    if nodes:
        what = f"kwok to mark the stack's {len(nodes)} nodes Ready (are they annotated kwok.x-k8s.io/node=fake?)"
        wait_for(what, ready, timeout)


#: Helm chart name fragment → control-plane component.
CHART_COMPONENTS = {"kueue": "kueue", "jobset": "jobset", "trainer": "trainer"}


def controller_users(helm_releases: list[Obj]) -> dict[str, str]:
    """component → ``system:serviceaccount:<ns>:<sa>`` its controller runs as, from the render's releases (the
    charts' naming rule: components/identity.py)."""
    users: dict[str, str] = {}
    for release in helm_releases:
        chart = str(release.get("chart", ""))
        component = next((c for fragment, c in CHART_COMPONENTS.items() if fragment in chart_name(chart)), None)
        if component is not None:
            values = release.get("values") or {}
            name, namespace = str(release["name"]), str(release["namespace"])
            users[component] = service_account_username(component, name, chart, namespace, values)
    return users
