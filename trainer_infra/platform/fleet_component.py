"""`Fleet`: every cluster of a MultiKueue fleet in one Pulumi program, one `TrainingPlatform` (and so one
explicit `kubernetes.Provider`) per cluster, so one `pulumi preview` shows every cluster's changes.

Workers are registered first; the manager's kubeconfig Secrets are built from each worker's
ServiceAccount token Secret as the worker's token controller filled it (the provider waits for that), and
stay Pulumi secrets end to end."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pulumi
import yaml

from trainer_infra.core.objects import FleetPlan, WorkerKubeconfig
from trainer_infra.platform.component import TrainingPlatform


def kubeconfig_text(marker: WorkerKubeconfig, data: dict[str, str] | None) -> str:
    """A kubeconfig for one worker from its token Secret's `data` (base64 `token` and `ca.crt`)."""
    data = data or {}
    token = base64.b64decode(data.get("token", "")).decode()
    cluster: dict[str, Any] = {"server": marker.server}
    if data.get("ca.crt"):
        cluster["certificate-authority-data"] = data["ca.crt"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": marker.cluster, "cluster": cluster}],
        "users": [{"name": marker.user, "user": {"token": token}}],
        "contexts": [{"name": marker.cluster, "context": {"cluster": marker.cluster, "user": marker.user}}],
        "current-context": marker.cluster,
    }
    return yaml.safe_dump(config, sort_keys=True)


def _kubeconfig_for(marker: WorkerKubeconfig) -> Callable[[dict[str, str] | None], str]:
    def build(data: dict[str, str] | None) -> str:
        return kubeconfig_text(marker, data)

    return build


def _markers(value: Any) -> list[WorkerKubeconfig]:
    if isinstance(value, WorkerKubeconfig):
        return [value]
    if isinstance(value, dict):
        return [m for v in value.values() for m in _markers(v)]
    if isinstance(value, list):
        return [m for v in value for m in _markers(v)]
    return []


class Fleet(pulumi.ComponentResource):
    clusters: pulumi.Output[Any]

    def __init__(self, name: str, fleet: FleetPlan, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainer-platform:index:Fleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.platforms: dict[str, TrainingPlatform] = {}
        order = [c for c in fleet.plans if c != fleet.manager] + [fleet.manager]
        for cluster in order:
            plan = fleet.plans[cluster]
            resolved: dict[WorkerKubeconfig, pulumi.Output[str]] = {}
            for marker in (m for obj in plan.objects for m in _markers(obj.manifest)):
                token = self.platforms[marker.cluster].created[marker.token_secret]
                data: pulumi.Output[Any] = getattr(token, "data")  # noqa: B009 (an output of a generic resource)
                resolved[marker] = pulumi.Output.secret(data.apply(_kubeconfig_for(marker)))
            self.platforms[cluster] = TrainingPlatform(cluster, plan, child, prefix=f"{cluster}-", resolved=resolved)
        self.clusters = pulumi.Output.from_input(
            {
                c: {
                    "versions": p.versions,
                    "namespaces": p.namespaces,
                    "kubernetesVersion": fleet.plans[c].outputs["kubernetesVersion"],
                }
                for c, p in self.platforms.items()
            }
        )
        self.register_outputs({"clusters": self.clusters})
