"""What a cloud node offers to pods: its machine's capacity minus the kubelet and system reservation and the
eviction threshold, by each cloud's published rule. Quota arithmetic counts these figures, never the machine's
nominal size, so a quota never promises what the kubelet keeps for itself.

Sources (checked 2026-11):
- GKE: https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations
  memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above 128 GiB,
  plus a 100 MiB eviction threshold; CPU: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% above 4.
- EKS (the EKS optimized AMIs, awslabs/amazon-eks-ami; nodeadm for AL2023): memory 11 MiB × max pods + 255 MiB,
  plus a 100 MiB eviction threshold; CPU as GKE's table (6% / 1% / 0.5% / 0.25%).
- AKS 1.29+: https://learn.microsoft.com/azure/aks/node-resource-reservations
  memory: the lesser of 20 MB × max pods + 50 MB and 25% of the memory, plus a 100 Mi eviction threshold
  (taken as MiB: the larger reading); CPU: the published table (1 core 60m, 2: 100m, 4: 140m, 8: 180m, 16: 260m,
  32: 420m, 64: 740m), which grows by 10m per core above 4 — applied above 64 cores too.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Literal

MI = Decimal(1 << 20)
GI = Decimal(1 << 30)
EVICTION = 100 * MI

Reservation = Literal["gke", "eks", "aks"]


def _tiers(total: Decimal, tiers: tuple[tuple[Decimal, Decimal], ...], rest: Decimal) -> Decimal:
    """Σ rate × the part of `total` inside each (size, rate) tier, then `rest` × what is above them all."""
    reserved, left = Decimal(0), total
    for size, rate in tiers:
        part = min(left, size)
        reserved += part * rate
        left -= part
    return reserved + left * rest


#: 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of every core above four.
_CPU_TIERS = ((Decimal(1), Decimal("0.06")), (Decimal(1), Decimal("0.01")), (Decimal(2), Decimal("0.005")))
_GKE_MEMORY_TIERS = (
    (4 * GI, Decimal("0.25")),
    (4 * GI, Decimal("0.20")),
    (8 * GI, Decimal("0.10")),
    (112 * GI, Decimal("0.06")),
)


def _tiered_cpu(vcpu: int) -> Decimal:
    return _tiers(Decimal(vcpu), _CPU_TIERS, Decimal("0.0025"))


def gke(vcpu: int, memory: Decimal, max_pods: int) -> tuple[Decimal, Decimal]:
    if memory < GI:
        return Decimal(vcpu) - _tiered_cpu(vcpu), memory - 255 * MI - EVICTION
    return Decimal(vcpu) - _tiered_cpu(vcpu), memory - _tiers(memory, _GKE_MEMORY_TIERS, Decimal("0.02")) - EVICTION


def eks(vcpu: int, memory: Decimal, max_pods: int) -> tuple[Decimal, Decimal]:
    return Decimal(vcpu) - _tiered_cpu(vcpu), memory - (11 * max_pods + 255) * MI - EVICTION


_AKS_CPU = {1: 60, 2: 100}


def aks(vcpu: int, memory: Decimal, max_pods: int) -> tuple[Decimal, Decimal]:
    milli = _AKS_CPU.get(vcpu, 140 + 10 * (vcpu - 4))
    reserved = min((20 * max_pods + 50) * MI, memory / 4)
    return Decimal(vcpu) - Decimal(milli) / 1000, memory - reserved - EVICTION


RULES: dict[Reservation, Callable[[int, Decimal, int], tuple[Decimal, Decimal]]] = {"gke": gke, "eks": eks, "aks": aks}


def allocatable(rule: Reservation, vcpu: int, memory: Decimal, max_pods: int) -> tuple[Decimal, Decimal]:
    """(cpu cores, memory bytes) a node of this size offers to pods, rounded down to whole millicores and MiB."""
    cpu, mem = RULES[rule](vcpu, memory, max_pods)
    return (cpu * 1000).to_integral_value(rounding="ROUND_FLOOR") / 1000, (mem / MI).to_integral_value(
        rounding="ROUND_FLOOR"
    ) * MI
