"""What the program will create, as plain data: the hand-off between the pure plan and Pulumi."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_infra.core.cloud import CloudResource


class SecretValue(str):
    """A manifest value that must stay secret: Pulumi wraps it, render prints `<secret>`."""


@dataclass(frozen=True)
class WorkerKubeconfig:
    """A manifest value only `pulumi up` can know: a kubeconfig for `server`, authenticated by the token
    the worker `cluster`'s token controller writes into the Secret `token_secret` (the object key of
    that Secret in the worker's plan). The platform resolves it to a Pulumi secret; render shows `<secret>`."""

    cluster: str
    token_secret: str
    server: str
    user: str


@dataclass(frozen=True)
class HelmRelease:
    name: str
    component: str
    chart: str
    chart_version: str
    namespace: str
    values: dict[str, Any]
    after: tuple[str, ...] = ()  # names of gates or releases that must be ready first
    repository: str | None = None  # classic (non-OCI) chart repository URL; `chart` is then the chart name


#: The Pulumi type of the resource a HelmRelease becomes (pulumi_kubernetes `helm.v4.Chart`).
CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


@dataclass(frozen=True)
class ReadinessGate:
    """Passes once `crds` are Established and a dry-run create of each probe is answered by the
    webhook (kueue#13036: webhooks fail for 10-30 s after the Deployment is Ready)."""

    name: str
    component: str
    release: str
    crds: tuple[str, ...]
    probes: tuple[dict[str, Any], ...]
    version: str
    api_groups: tuple[str, ...] = ()  # custom resources of these groups wait for this gate
    timeout_seconds: int = 300
    hint: str = ""  # what to do when it times out (e.g. CRDs the platform does not install)


@dataclass(frozen=True)
class ManagedObject:
    """One Kubernetes object we own, with the options that keep user data safe."""

    manifest: dict[str, Any]
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()
    after: tuple[str, ...] = ()  # releases, gates or earlier objects (by key) that must exist first
    # A server-side-apply patch of an object we do not own (`NodePatch`): deleting it removes only our fields.
    patch: bool = False

    @property
    def api_group(self) -> str:
        api_version = str(self.manifest["apiVersion"])
        return api_version.split("/")[0] if "/" in api_version else ""

    @property
    def key(self) -> str:
        """Unique, stable resource name: kind, namespace and name."""
        meta = self.manifest["metadata"]
        ns = meta.get("namespace")
        kind = self.manifest["kind"].lower() + ("patch" if self.patch else "")
        return f"{kind}-{ns + '-' if ns else ''}{meta['name']}"


@dataclass(frozen=True)
class PlanPart:
    """What one area contributes to the plan (see stack/build.py PLANNERS)."""

    releases: tuple[HelmRelease, ...] = ()
    gates: tuple[ReadinessGate, ...] = ()
    objects: tuple[ManagedObject, ...] = ()
    resources: tuple[CloudResource, ...] = ()


@dataclass(frozen=True)
class ClusterAccess:
    """How the Kubernetes provider reaches the cluster (kubeconfig contents stay secret)."""

    kubeconfig: SecretValue | None = None
    context: str | None = None


@dataclass(frozen=True)
class Plan:
    """Everything the Pulumi program needs: it reads no config of its own."""

    releases: tuple[HelmRelease, ...]
    gates: tuple[ReadinessGate, ...]
    objects: tuple[ManagedObject, ...]
    protect_crds: bool
    outputs: dict[str, Any] = field(default_factory=dict)
    cluster: ClusterAccess = field(default_factory=ClusterAccess)
    resources: tuple[CloudResource, ...] = ()  # of the cloud SDKs (node groups), registered first
    # A draining fleet worker: every chart object is retained in the cluster when dropped, none protected.
    leaving: bool = False


@dataclass(frozen=True)
class FleetPlan:
    """One Plan per cluster of a MultiKueue fleet, workers first: the manager's objects read the workers'
    tokens (`WorkerKubeconfig`)."""

    manager: str
    plans: dict[str, Plan]
