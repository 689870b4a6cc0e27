"""Machine types of the clouds: what a node of each type is (vCPUs, memory, GPUs) and offers to pods (allocatable),
so a cloud pool names its machine and never restates its shape.

One table per cloud in `machine_types/<cloud>.yaml`, each row with its source. Adding a machine is one row:

    a3-megagpu-8g:
      vcpu: 208
      memoryGiB: 1872            # the machine's nominal memory, GiB (2^30 bytes) as every cloud publishes it
      maxPods: 110               # what the backend sets on its pools; it enters the memory reservation
      gpu: {count: 8, product: NVIDIA-H100-80GB-HBM3, type: nvidia-h100-mega-80gb}
      source: https://cloud.google.com/compute/docs/gpus#a3-series

`gpu.product` is the value NVIDIA GPU Feature Discovery puts in `nvidia.com/gpu.product`; `gpu.type` the cloud's
own accelerator name where its API needs one (GKE's guest accelerator type).
`topology: true` marks the machines whose nodes carry the cloud's physical-topology labels.
The allocatable figures come from the cloud's reservation rule (nodepools/allocatable.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

import yaml
from pydantic import Field

from trainer_infra.core.errors import did_you_mean
from trainer_infra.core.model import StrictModel
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.types import ExtendedResource, LabelValue
from trainer_infra.core.upstream import nvidia
from trainer_infra.nodepools.allocatable import GI, Reservation, allocatable
from trainer_infra.nodepools.model import Accelerator, NodeShape

TABLES = Path(__file__).with_name("machine_types")


class MachineGpu(StrictModel):
    count: int = Field(ge=1, le=64)
    resource: ExtendedResource = nvidia.GPU
    product: LabelValue | None = None
    type: str | None = Field(default=None, description="The cloud's accelerator type name, where its API takes one.")


class MachineType(StrictModel):
    vcpu: int = Field(ge=1)
    memory_gib: Decimal = Field(gt=0, alias="memoryGiB")
    max_pods: int = Field(default=110, ge=1, le=1000)
    gpu: MachineGpu | None = None
    topology: bool = Field(
        default=False,
        description="The cloud reports this machine's physical topology, so its topology node labels exist.",
    )
    source: str = Field(min_length=8)


class MachineTableFile(StrictModel):
    reservation: Reservation
    machines: dict[str, MachineType]


@dataclass(frozen=True)
class Machine:
    """One machine type and the node shape (allocatable) a pool of it offers."""

    name: str
    facts: MachineType
    reservation: Reservation

    @property
    def shape(self) -> NodeShape:
        cpu, memory = allocatable(self.reservation, self.facts.vcpu, self.facts.memory_gib * GI, self.facts.max_pods)
        gpu = self.facts.gpu
        acc = Accelerator(resource=gpu.resource, count=gpu.count, product=gpu.product) if gpu else None
        return NodeShape(
            cpu=format_amount("cpu", cpu),
            memory=format_amount("memory", memory),
            pods=self.facts.max_pods,
            accelerator=acc,
        )


@dataclass(frozen=True)
class MachineTable:
    cloud: str
    reservation: Reservation
    rows: dict[str, MachineType]

    def get(self, name: str) -> Machine | None:
        row = self.rows.get(name)
        return Machine(name, row, self.reservation) if row is not None else None

    def names(self) -> list[str]:
        return sorted(self.rows)


def known_machine(cloud: str, name: str) -> str:
    """`name` if the cloud's table has it; else ValueError naming the closest one (a settings field validator)."""
    table = machine_table(cloud)
    if table.get(name) is None:
        hint = did_you_mean(name, table.names()) or "known: " + ", ".join(table.names())
        raise ValueError(f"{name} is not in the {cloud} machine table (nodepools/machine_types/{cloud}.yaml); {hint}")
    return name


@cache
def machine_table(cloud: str) -> MachineTable:
    """The table of one cloud (`gke`, `eks`, `aks`), read once."""
    parsed = MachineTableFile.model_validate(yaml.safe_load((TABLES / f"{cloud}.yaml").read_text()))
    return MachineTable(cloud, parsed.reservation, parsed.machines)
