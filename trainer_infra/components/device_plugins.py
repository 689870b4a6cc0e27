"""The device plugins the pools' node images lack (nodepools/device_plugins.py says which): NVIDIA's
(`nvidia-device-plugin`, NVIDIA/k8s-device-plugin) and AWS's EFA plugin (`aws-efa-k8s-device-plugin`, aws/eks-charts),
each from its official chart at the matrix's version, installed only when a pool needs it.

Each DaemonSet runs only on the pools that need it (a node affinity on their pool label; the EFA chart keeps its
own instance-type affinity) and tolerates exactly those pools' taint keys. Neither serves an API of ours: no
readiness gate. Charts are not in ../shared/charts: offline render names them; an install needs the chart
repository (or the chart mirror).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer_infra.components.component import ComponentSettings, ResolvedRelease, StackView
from trainer_infra.core.images import split_image
from trainer_infra.nodepools.device_plugins import pools_needing, taint_keys
from trainer_infra.nodepools.labels import POOL_LABEL
from trainer_infra.nodepools.model import NodePool
from trainer_infra.observability.facts import MetricsEndpoint


@dataclass(frozen=True)
class Needed:
    """Installed because a pool needs it: the matrix default, in the matrix's namespace."""

    install: bool = True
    version: str | None = None
    namespace: str | None = None


def _tolerations(pools: list[NodePool]) -> list[dict[str, str]]:
    keys = set().union(*(taint_keys(p) for p in pools))
    return [{"key": key, "operator": "Exists"} for key in sorted(keys)]


def _on_pools(pools: list[NodePool]) -> dict[str, Any]:
    names = sorted(p.name for p in pools)
    term = {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": names}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


class DevicePlugin:
    settings_model = None
    after: tuple[str, ...] = ()
    owns_namespace = True

    def __init__(self, name: str, plugin: str) -> None:
        self.name = name
        self.plugin = plugin
        self.version_path = f"components.{name}"

    def pools(self, stack: StackView) -> list[NodePool]:
        return pools_needing(list(stack.node_pools), self.plugin)

    def settings(self, stack: StackView) -> ComponentSettings | None:
        return Needed() if self.pools(stack) else None

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        pools = self.pools(stack)
        repository, tag = split_image(release.image("plugin"))
        values: dict[str, Any] = {
            "image": {"repository": repository, "tag": tag},
            "tolerations": _tolerations(pools),
        }
        if self.plugin == "nvidia":  # the chart's own affinity wants NFD labels these nodes need not carry
            values["affinity"] = _on_pools(pools)
        return values

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint | None:
        return None

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return ()


NVIDIA = DevicePlugin("nvidia-device-plugin", "nvidia")
EFA = DevicePlugin("aws-efa-k8s-device-plugin", "efa")
