"""The contract of a node-pool backend. A backend is one module exporting `BACKEND` plus one line in
nodepools/registry.py; mypy checks the module's object against this Protocol there.

A cloud backend (gke, eks, aks) also declares the cluster its pools join (`cluster_model`: the stack's
`cloud.<name>` block: project/account, region, the cluster stack's outputs), takes the node shape from its machine
table (`shape`) and returns its node groups as `CloudResource`s: plain data the Pulumi step turns into the SDK's
typed classes with an explicit provider (core/cloud.py, platform/cloud.py)."""

from __future__ import annotations

from typing import Any, Protocol

from trainer_infra.core.cloud import CloudResource
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.nodepools.disk import DiskRule
from trainer_infra.nodepools.labels import DEFAULT_TOPOLOGY, Taint
from trainer_infra.nodepools.model import NodePool, NodeShape, ProvisioningRequest, ResolvedPool


class NodePoolBackend(Protocol):
    @property
    def name(self) -> str:
        """The value of `nodePools[].backend`, and the key of the settings block."""

    @property
    def settings_model(self) -> type[StrictModel]:
        """The model of `nodePools[].<name>`."""

    @property
    def settings_hint(self) -> str:
        """An example settings block, shown when it is missing."""

    @property
    def scaling_hint(self) -> str:
        """What to change when the pool autoscales under topology-aware scheduling without provisioning."""

    @property
    def cluster_model(self) -> type[StrictModel] | None:
        """The model of the stack's `cloud.<name>` block (the cluster the pools join); None: the backend needs none."""

    def shape(self, pool: NodePool, settings: Any) -> NodeShape | None:
        """What one node offers to pods, from the backend's own facts (its machine table's allocatable figures);
        None: the pool declares `node` itself. A declared `node` contradicting it is refused (nodepools/checks.py)."""

    def autoscaling(self, pool: NodePool, settings: Any) -> tuple[int, int] | None:
        """(min, max) nodes when the pool scales by itself; None for a fixed size. Quotas count `max`."""

    def provisioning(self, pool: NodePool, settings: Any) -> ProvisioningRequest | None:
        """When the pool's nodes exist only once requested (GKE queued provisioning): the ProvisioningRequest class
        Kueue must ask for before admitting onto its flavor (the queues area renders the AdmissionCheck)."""

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        """Topology levels when the pool declares none."""

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        """The only level keys this pool's nodes carry (None: whatever the pool declares). A cloud's topology labels
        exist only on some machine types (MachineType.topology), so this depends on the pool."""

    def extra_taints(self) -> tuple[Taint, ...]:
        """Taints the backend itself puts on every node (flavors and runtimes must tolerate them)."""

    def node_count(self, pool: NodePool, settings: Any) -> int:
        """The most nodes the pool can have: what quota arithmetic counts."""

    def extra_resources(self, pool: NodePool, settings: Any) -> dict[str, int]:
        """Extended resources one node advertises besides cpu, memory and its accelerator (EFA interfaces): pods
        request them, so the team queues cover them too (a resource no ClusterQueue covers is never admitted)."""

    def selector(self, settings: Any) -> dict[str, str]:
        """Labels the backend adopts nodes by (ResourceFlavor nodeLabels instead of the pool label); {} if none."""

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        """What the backend refuses, with paths under `pool.at`."""

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        """What the backend refuses across all its pools (e.g. one node in two pools)."""

    def kubelet_unmanaged(self, pool: ResolvedPool) -> bool:
        """Whether the pool's nodes run a kubelet the platform does not configure (their per-pod PID limit is
        someone else's to set: validate says what to set)."""

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        """When the backend renders each node's disk: the provisioner whose kubelet reservation applies to it
        (nodepools/disk.py sizes it, `ResolvedPool.disk`, for the backend to render); None: the nodes' own disk."""

    def default_disk(self, pool: NodePool, settings: Any) -> str | None:
        """What the nodes' disk offers pods when the platform does not render it and the pool declares no
        `disk` (kwok: its fake disk); None: unknown, nothing to check."""

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        """The objects the backend owns for one pool."""

    def shared_objects(self, pools: list[ResolvedPool], mirror: str | None) -> list[ManagedObject]:
        """Objects the backend owns once for all its pools (e.g. a controller)."""

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        """Cloud resources the backend creates for one pool (a node group), `cluster` being its `cloud.<name>`
        block (validated present when `cluster_model` is set)."""


class BackendDefaults:
    """What most backends do: our own topology levels, nodes carry whatever levels the pool declares, no taints or
    selectors of the backend's own, nothing checked or owned across pools, no cloud. A backend overrides what
    differs."""

    cluster_model: type[StrictModel] | None = None
    scaling_hint = "use a fixed size.count, or components.kueue.tas.enabled: false"

    def shape(self, pool: NodePool, settings: Any) -> NodeShape | None:
        return None

    def autoscaling(self, pool: NodePool, settings: Any) -> tuple[int, int] | None:
        return None

    def provisioning(self, pool: NodePool, settings: Any) -> ProvisioningRequest | None:
        return None

    def extra_resources(self, pool: NodePool, settings: Any) -> dict[str, int]:
        return {}

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        return DEFAULT_TOPOLOGY

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        return None

    def extra_taints(self) -> tuple[Taint, ...]:
        return ()

    def selector(self, settings: Any) -> dict[str, str]:
        return {}

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        return []

    def kubelet_unmanaged(self, pool: ResolvedPool) -> bool:
        return False

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        return None

    def default_disk(self, pool: NodePool, settings: Any) -> str | None:
        return None

    def shared_objects(self, pools: list[ResolvedPool], mirror: str | None) -> list[ManagedObject]:
        return []

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        return []
