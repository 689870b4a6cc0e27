"""`nodePools[]`: what every pool declares whatever its backend, and the facts resolved from it once.

A backend adds its own settings block (`nodePools[].<backend>`, see nodepools/registry.py) and decides what
only it knows: default topology, the taints it puts on nodes, how many nodes the pool has, its objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from trainer_infra.core.model import StrictModel
from trainer_infra.core.quantity import quantity
from trainer_infra.core.types import DnsLabel, ExtendedResource, LabelKey, LabelValue, PositiveQuantity
from trainer_infra.core.upstream import amd, aws, kubernetes, nvidia
from trainer_infra.nodepools import pids
from trainer_infra.nodepools.disk import NodeDisk
from trainer_infra.nodepools.labels import PRODUCT_LABELS, Taint, accelerator_taint


class Accelerator(StrictModel):
    """The extended resource a node advertises (device plugin), and its product label."""

    resource: ExtendedResource = Field(default=nvidia.GPU, description="Extended resource name (domain/name).")
    count: int = Field(ge=1, le=64, description="Devices per node.")
    product: LabelValue | None = Field(default=None, description='e.g. "NVIDIA-H100-80GB-HBM3".')
    product_label: LabelKey | None = Field(
        default=None,
        description=f"Label that carries the product. Default by the resource's vendor: {nvidia.PRODUCT_LABEL} "
        f"(NVIDIA GPU Feature Discovery), {amd.PRODUCT_LABEL} (AMD GPU node labeller).",
    )

    @model_validator(mode="after")
    def _vendor_label(self) -> Accelerator:
        if self.product is not None and self.product_label is None and self.product_label_key is None:
            vendor = self.resource.partition("/")[0]
            raise ValueError(
                f"productLabel: no default for {vendor} accelerators; set the node label that carries the product"
            )
        return self

    @property
    def product_label_key(self) -> str | None:
        """The label the product goes into: `productLabel`, else the vendor's (PRODUCT_LABELS)."""
        return self.product_label or PRODUCT_LABELS.get(self.resource.partition("/")[0])


class NodeShape(StrictModel):
    """What one node offers to pods (allocatable)."""

    cpu: PositiveQuantity
    memory: PositiveQuantity
    pods: int = Field(default=110, ge=1)
    accelerator: Accelerator | None = None


class PoolSize(StrictModel):
    """`count` for fixed pools (kwok: derived from the layout); `min`/`max` for autoscaling (karpenter)."""

    count: int | None = Field(default=None, ge=0)
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)


class NodePool(StrictModel):
    """A GPU (or CPU) node pool. Its nodes carry `trainer-platform.io/node-pool: <name>`, which its
    Kueue ResourceFlavor selects."""

    name: DnsLabel = Field(
        description="Pool name; its ResourceFlavor is `<name>-<hash of the flavor's immutable fields>`."
    )
    backend: str = Field(description="The backend that makes or adopts the nodes (nodepools/registry.py).")
    node: NodeShape | None = Field(
        default=None,
        description="What one node offers to pods (allocatable). Cloud backends (gke, eks, aks) take it from their "
        "machine table; given here too, it may only be smaller (room for DaemonSets), never another GPU.",
    )
    size: PoolSize = Field(default_factory=PoolSize)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Extra node labels.")
    taints: list[Taint] | None = Field(
        default=None,
        description="Node taints; default for pools with an accelerator: <its resource>=present:NoSchedule.",
    )
    capacity_type: Literal["on-demand", "spot", "reserved"] = "on-demand"
    pod_pids_limit: Annotated[int, AfterValidator(pids.checked)] = Field(
        default=pids.DEFAULT,
        description=(
            f"Processes and threads one pod may run (kubelet `{pids.KUBELET_KEY}`), so a fork bomb stops at its "
            f"pod: set through each cloud's kubelet setting (gke, aks, eks, karpenter); static pools: validate "
            f"prints what to set; kwok: none (fake nodes). At least {pids.FLOOR}."
        ),
    )
    disk: PositiveQuantity | None = Field(
        default=None,
        description="Each node's disk, where pods' ephemeral storage lives. gke, eks, aks and karpenter with its own "
        "nodeClass: the volume the platform renders (default: sized so a container at tenancy.ephemeralStorage.max "
        "fits, plus room for images and logs; an override below that minimum is refused). static, kwok, karpenter "
        "nodeClassName: what the nodes offer pods (kwok default 1Ti), checked against the bound by validate.",
    )
    topology: list[LabelKey] | None = Field(
        default=None,
        description=(
            f"Topology level label keys, coarse → fine, ending with {kubernetes.HOSTNAME_LABEL}. Default: "
            f"trainer-platform.io/block, trainer-platform.io/rack, {kubernetes.HOSTNAME_LABEL} (karpenter: "
            f"{aws.NETWORK_NODE_LAYER_PREFIX}1..3, {kubernetes.HOSTNAME_LABEL})."
        ),
    )

    def configured_taints(self, node: NodeShape) -> list[Taint]:
        """The pool's own taints: as configured, or the GPU default for pools with an accelerator."""
        if self.taints is not None:
            return list(self.taints)
        return [accelerator_taint(node.accelerator.resource)] if node.accelerator else []

    @property
    def settings(self) -> Any:
        """The backend's settings block (`nodePools[].<backend>`), None when absent."""
        return getattr(self, self.backend, None)


def per_node(node: NodeShape, extra: Mapping[str, int] | None = None) -> dict[str, Decimal]:
    """What one node offers to pods: cpu, memory, its accelerator and the backend's extended resources (EFA)."""
    out = {"cpu": quantity(node.cpu), "memory": quantity(node.memory)}
    if node.accelerator:
        out[node.accelerator.resource] = Decimal(node.accelerator.count)
    out |= {res: Decimal(count) for res, count in sorted((extra or {}).items())}
    return out


@dataclass(frozen=True)
class ProvisioningRequest:
    """Nodes that exist only once requested: Kueue's ProvisioningRequest admission check (a ProvisioningRequestConfig
    of this class, managing these resources) guards the pool's flavor, so a job is admitted once its nodes are
    provisioned and requeued when the request fails."""

    provisioning_class: str  # e.g. queued-provisioning.gke.io
    managed_resources: tuple[str, ...]


@dataclass(frozen=True)
class ResolvedPool:
    """A pool's derived facts, worked out once (nodepools/resolve.py) and read by every consumer: node
    objects, ResourceFlavors, quotas, runtime tolerations and policies."""

    config: NodePool
    index: int
    node: NodeShape  # declared, or the backend's (machine table)
    taints: tuple[Taint, ...]  # configured + what the backend puts on its nodes
    topology: tuple[str, ...]
    node_count: int
    per_node: dict[str, Decimal]
    node_labels: dict[str, str]  # every node of the pool carries these (topology aside)
    flavor_labels: dict[str, str]  # what its ResourceFlavor selects on
    autoscaling: tuple[int, int] | None = None  # (min, max) when the pool scales itself; node_count is max
    provisioning: ProvisioningRequest | None = None  # Kueue asks for the nodes before admitting onto the flavor
    disk: NodeDisk | None = None  # the disk the platform renders per node; None: the nodes' own (nodepools/disk.py)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def at(self) -> str:
        return f"nodePools[{self.index}]"

    @property
    def settings(self) -> Any:
        return self.config.settings

    @property
    def accelerator_resource(self) -> str | None:
        return self.node.accelerator.resource if self.node.accelerator else None

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [t.toleration() for t in self.taints]

    @property
    def capacity(self) -> dict[str, Decimal]:
        return {k: v * self.node_count for k, v in self.per_node.items()}
