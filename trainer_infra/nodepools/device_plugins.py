"""Which device plugins a stack's pools need the platform to install: the ones their node image does not run.

- NVIDIA device plugin: the EKS AL2023 NVIDIA AMIs ship the driver and container toolkit but not the plugin;
  Bottlerocket NVIDIA AMIs ship it (EKS user guide, ml-eks-optimized-ami). kwok and static nodes advertise their
  GPUs themselves (fake, or someone else's plugin); GKE installs its own.
- EFA device plugin: no EKS AMI ships it ("you must install the EFA device plugin separately", same page); it
  advertises `vpc.amazonaws.com/efa`, the resource EFA pods request.
A Karpenter pool on an existing node class (`nodeClassName`) is not counted: its AMI is not known here.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.nodepools.karpenter import KarpenterPool
from trainer_infra.nodepools.model import NodePool

NVIDIA_RESOURCE = "nvidia.com/gpu"
#: AMI alias families (EC2NodeClass amiSelectorTerms) whose images lack the NVIDIA device plugin.
KARPENTER_FAMILIES_WITHOUT_PLUGIN = ("al2023", "al2")


def needs_nvidia_plugin(pool: NodePool) -> bool:
    settings = pool.settings
    accelerator = pool.node.accelerator if pool.node is not None else None
    if not isinstance(settings, KarpenterPool) or accelerator is None or accelerator.resource != NVIDIA_RESOURCE:
        return False
    nc = settings.node_class
    return nc is not None and nc.ami_alias.split("@", 1)[0] in KARPENTER_FAMILIES_WITHOUT_PLUGIN


def needs_efa_plugin(pool: NodePool) -> bool:
    settings = pool.settings
    return isinstance(settings, KarpenterPool) and settings.efa


def pools_needing(pools: Sequence[NodePool], plugin: str) -> list[NodePool]:
    test = needs_nvidia_plugin if plugin == "nvidia" else needs_efa_plugin
    return [p for p in pools if test(p)]
