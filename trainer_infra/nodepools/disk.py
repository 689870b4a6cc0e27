"""How large a node's disk must be for a pod at the platform's per-container bound (`tenancy.ephemeralStorage.max`)
to get a node. Kueue does not count node disk, so a pod asking for more ephemeral storage than every node of its
flavor offers is admitted and then never scheduled; where the platform renders the node's disk, it sizes it here.

A node offers pods its disk minus what the kubelet keeps (its reservation and hard eviction threshold), by each
provisioner's rule (checked 2026-11):
- eks, karpenter: kube-reserved 1Gi plus the `nodefs.available` 10% eviction threshold, as Karpenter computes the
  nodes it launches (karpenter-provider-aws v1.15.2 pkg/providers/instancetype/types.go `kubeReservedResources`,
  `evictionThreshold`).
- gke: an eviction threshold of 10% of the boot disk plus a system reservation of min(50%, 6 GiB + 35%, 100 GiB)
  of it (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, "Local ephemeral storage
  reservation").
- aks: the kubelet's default `nodefs.available` 10% (AKS's kubeletConfig API: "Must be greater than or equal to
  the system default of 10%"; https://learn.microsoft.com/azure/aks/node-resource-reservations reserves no disk).

On top of that the disk holds what no rule counts, sharing the filesystem with pods' ephemeral storage
(https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#local-ephemeral-storage): the
container images (containerd keeps each image's compressed layers and its unpacked snapshot) and the OS and logs.
`IMAGES` is room for two large training images on disk at once (the running one and the next being pulled, ~30 GiB
each with both copies): the catalog's runtimes use CUDA images (pytorch/pytorch:*-cuda*-runtime,
nvcr.io/nvidia/jax) and teams bring their own, often larger; a choice, not a measurement (`crictl images` on a
node shows yours). `SYSTEM` is the OS of single-volume AMIs and the kubelet's rotated container logs
(containerLogMaxSize 10Mi × containerLogMaxFiles 5 per container by default). The default disk holds a pod at the
bound plus both; a `nodePools[].disk` override may go down to the minimum that still schedules a pod at the bound
(then images and logs eat into that pod's room and the kubelet may evict it), never below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from trainer_infra.core.quantity import quantity

GI = Decimal(1 << 30)
IMAGES_GIB = 60
SYSTEM_GIB = 10
HEADROOM_GIB = IMAGES_GIB + SYSTEM_GIB

DiskRule = Literal["gke", "eks", "aks"]
EVICTION = Decimal("0.10")  # the kubelet's default hard eviction threshold nodefs.available<10%


def _eks(disk: Decimal) -> Decimal:
    return disk - 1 - EVICTION * disk


def _gke(disk: Decimal) -> Decimal:
    return disk - EVICTION * disk - min(disk / 2, 6 + Decimal("0.35") * disk, Decimal(100))


def _aks(disk: Decimal) -> Decimal:
    return disk - EVICTION * disk


#: GiB a disk of this many GiB offers pods, per provisioner (every one grows with the disk).
OFFERED: dict[DiskRule, Callable[[Decimal], Decimal]] = {"eks": _eks, "gke": _gke, "aks": _aks}
#: The largest disk each renders: gp3 EBS 16 TiB (EC2 user guide, ebs-volume-types), a GKE boot disk 64 TiB
#: (pd-balanced), an AKS OS disk 2 TiB (the AKS API's osDiskSizeGB maximum, 2048).
LARGEST_GIB: dict[DiskRule, int] = {"eks": 16384, "gke": 65536, "aks": 2048}


def gib(text: str) -> int:
    """A quantity as whole GiB, rounded up (the clouds size disks in whole GiB)."""
    return math.ceil(quantity(text) / GI)


def smallest_disk(rule: DiskRule, need_gib: Decimal) -> int:
    """The fewest whole GiB whose disk offers pods at least `need_gib`."""
    offered = OFFERED[rule]
    low = high = max(1, math.ceil(need_gib))
    while offered(Decimal(high)) < need_gib:
        low, high = high, high * 2
    while low < high:  # offered() grows with the disk: bisect the first size that suffices
        mid = (low + high) // 2
        low, high = (mid + 1, high) if offered(Decimal(mid)) < need_gib else (low, mid)
    return high


@dataclass(frozen=True)
class NodeDisk:
    """The disk the platform renders for each node of a pool (GiB), and the least that holds a pod at the bound."""

    rule: DiskRule
    size_gib: int
    minimum_gib: int
    override: bool  # from nodePools[].disk, not derived

    @property
    def quantity(self) -> str:
        return f"{self.size_gib}Gi"


def node_disk(rule: DiskRule, bound: str, override: str | None) -> NodeDisk:
    """The derived disk (a pod at `bound` plus HEADROOM_GIB) or the pool's override; checks compare the override
    with `minimum_gib` and both with LARGEST_GIB."""
    bound_gib = quantity(bound) / GI
    minimum = smallest_disk(rule, bound_gib)
    if override is not None:
        return NodeDisk(rule, gib(override), minimum, True)
    return NodeDisk(rule, smallest_disk(rule, bound_gib + HEADROOM_GIB), minimum, False)
