"""`nodePools[]`: one declaration per pool, from which nodes, flavors, quotas and tolerations derive."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Literal

from pydantic import Field

from trainer_infra.config.base import StrictModel
from trainer_infra.config.types import DnsLabel, Quantity
from trainer_infra.nodepools.karpenter import KarpenterPool
from trainer_infra.nodepools.kwok import KWOK_TAINT, KwokPool
from trainer_infra.nodepools.labels import (
    CAPACITY_TYPE_LABEL,
    DEFAULT_TOPOLOGY,
    GPU_TAINT,
    POOL_LABEL,
    LabelKey,
    LabelValue,
    Taint,
    quantity,
)
from trainer_infra.nodepools.static import StaticPool

Backend = Literal["kwok", "static", "karpenter"]


class Accelerator(StrictModel):
    """The extended resource a node advertises (device plugin), and its product label."""

    resource: LabelKey = Field(default="nvidia.com/gpu", description="Extended resource name.")
    count: int = Field(ge=1, le=64, description="Devices per node.")
    product: LabelValue | None = Field(default=None, description='e.g. "NVIDIA-H100-80GB-HBM3".')
    product_label: LabelKey = Field(
        default="nvidia.com/gpu.product", description="Label that carries the product (GPU Feature Discovery's)."
    )


class NodeShape(StrictModel):
    """What one node offers to pods (allocatable)."""

    cpu: Quantity
    memory: Quantity
    pods: int = Field(default=110, ge=1)
    accelerator: Accelerator | None = None


class PoolSize(StrictModel):
    """`count` for fixed pools (kwok: derived from the layout); `min`/`max` for autoscaling (karpenter)."""

    count: int | None = Field(default=None, ge=0)
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)


class NodePoolConfig(StrictModel):
    """A GPU (or CPU) node pool. Its nodes carry `trainer-platform.io/node-pool: <name>`, which its
    Kueue ResourceFlavor selects."""

    name: DnsLabel = Field(description="Pool name; also the ResourceFlavor name.")
    backend: Backend = Field(description="kwok (simulated), static (existing nodes) or karpenter.")
    node: NodeShape
    size: PoolSize = Field(default_factory=PoolSize)
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, description="Extra node labels.")
    taints: list[Taint] | None = Field(
        default=None,
        description="Node taints; default for pools with an accelerator: nvidia.com/gpu=present:NoSchedule.",
    )
    capacity_type: Literal["on-demand", "spot", "reserved"] = "on-demand"
    topology: list[LabelKey] | None = Field(
        default=None,
        description=(
            "Topology level label keys, coarse → fine, ending with kubernetes.io/hostname. Default: "
            "trainer-platform.io/block, trainer-platform.io/rack, kubernetes.io/hostname (karpenter: "
            "topology.k8s.aws/network-node-layer-1..3, kubernetes.io/hostname)."
        ),
    )
    kwok: KwokPool | None = None
    static: StaticPool | None = None
    karpenter: KarpenterPool | None = None

    @property
    def configured_taints(self) -> list[Taint]:
        """The pool's own taints: as configured, or the GPU default for pools with an accelerator."""
        return list(self.taints) if self.taints is not None else ([GPU_TAINT] if self.node.accelerator else [])

    @property
    def resolved_taints(self) -> list[Taint]:
        """The pool's taints plus what the backend itself puts on nodes (kwok's)."""
        taints = self.configured_taints
        if self.backend == "kwok" and KWOK_TAINT not in taints:
            taints.append(KWOK_TAINT)
        return taints

    @property
    def resolved_topology(self) -> tuple[str, ...]:
        if self.topology is not None:
            return tuple(self.topology)
        if self.backend == "karpenter":
            from trainer_infra.nodepools.karpenter import DEFAULT_EKS_TOPOLOGY

            return DEFAULT_EKS_TOPOLOGY
        return DEFAULT_TOPOLOGY

    @property
    def flavor_labels(self) -> dict[str, str]:
        """ResourceFlavor nodeLabels: the pool label, or for adopted static nodes the user's selector."""
        if self.static is not None and self.static.node_selector:
            return dict(sorted(self.static.node_selector.items()))
        return {POOL_LABEL: self.name}

    def node_labels(self) -> dict[str, str]:
        """Labels every node of the pool carries (topology labels aside)."""
        out = {**self.labels, POOL_LABEL: self.name, CAPACITY_TYPE_LABEL: self.capacity_type}
        acc = self.node.accelerator
        if acc and acc.product:
            out[acc.product_label] = acc.product
        if self.static is not None and self.static.node_selector:
            out.update(self.static.node_selector)
        return dict(sorted(out.items()))

    @property
    def node_count(self) -> int:
        """Nodes the pool can have at most: what its quota arithmetic counts."""
        if self.backend == "kwok" and self.kwok is not None:
            return math.prod(self.kwok.layout)
        if self.backend == "static" and self.static is not None and self.static.nodes:
            return len(self.static.nodes)
        if self.backend == "karpenter":
            return self.size.max or 0
        return self.size.count or 0

    @property
    def accelerator_resource(self) -> str | None:
        return self.node.accelerator.resource if self.node.accelerator else None

    def per_node(self) -> dict[str, Decimal]:
        out = {"cpu": quantity(self.node.cpu), "memory": quantity(self.node.memory)}
        if self.node.accelerator:
            out[self.node.accelerator.resource] = Decimal(self.node.accelerator.count)
        return out

    def capacity(self) -> dict[str, Decimal]:
        return {k: v * self.node_count for k, v in self.per_node().items()}
