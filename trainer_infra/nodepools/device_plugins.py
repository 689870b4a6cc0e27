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

from trainer_infra.core.upstream import nvidia
from trainer_infra.nodepools.eks import NVIDIA_PLUGIN_MISSING, EksPool
from trainer_infra.nodepools.karpenter import KarpenterPool
from trainer_infra.nodepools.model import NodePool, NodeShape
from trainer_infra.nodepools.registry import BACKENDS

NVIDIA_RESOURCE = nvidia.GPU
#: AMI alias families (EC2NodeClass amiSelectorTerms) whose images lack the NVIDIA device plugin.
KARPENTER_FAMILIES_WITHOUT_PLUGIN = ("al2023", "al2")


def node_shape(pool: NodePool) -> NodeShape | None:
    """The pool's node: declared, or its backend's (machine table)."""
    return pool.node or BACKENDS[pool.backend].shape(pool, pool.settings)


def needs_nvidia_plugin(pool: NodePool) -> bool:
    settings, node = pool.settings, node_shape(pool)
    if node is None or node.accelerator is None or node.accelerator.resource != NVIDIA_RESOURCE:
        return False
    if isinstance(settings, EksPool):
        return settings.ami_type in NVIDIA_PLUGIN_MISSING
    if isinstance(settings, KarpenterPool) and settings.node_class is not None:
        return settings.node_class.ami_alias.split("@", 1)[0] in KARPENTER_FAMILIES_WITHOUT_PLUGIN
    return False


def needs_efa_plugin(pool: NodePool) -> bool:
    return isinstance(pool.settings, EksPool | KarpenterPool) and pool.settings.efa


def pools_needing(pools: Sequence[NodePool], plugin: str) -> list[NodePool]:
    test = needs_nvidia_plugin if plugin == "nvidia" else needs_efa_plugin
    return [p for p in pools if test(p)]


def taint_keys(pool: NodePool) -> set[str]:
    """The keys of the taints the pool's nodes carry (its own, or its accelerator's default)."""
    if pool.taints is not None:
        return {t.key for t in pool.taints}
    node = node_shape(pool)
    return {node.accelerator.resource} if node is not None and node.accelerator is not None else set()
