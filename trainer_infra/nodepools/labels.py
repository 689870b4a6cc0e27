"""Label keys, values and taints shared by every backend, and the keys the platform assigns itself."""

from __future__ import annotations

from typing import Literal

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import LabelKey, LabelValue
from trainer_infra.core.upstream import amd, kubernetes, nvidia

HOSTNAME = kubernetes.HOSTNAME_LABEL
ZONE = kubernetes.ZONE_LABEL
# Every node of a pool carries this label; the pool's ResourceFlavor selects on it, so two pools can
# never select each other's nodes.
POOL_LABEL = "trainer-platform.io/node-pool"
CAPACITY_TYPE_LABEL = "trainer-platform.io/capacity-type"
# Our own topology keys where the provider sets none (kwok, on-prem).
BLOCK_LABEL = "trainer-platform.io/block"
RACK_LABEL = "trainer-platform.io/rack"
DEFAULT_TOPOLOGY = (BLOCK_LABEL, RACK_LABEL, HOSTNAME)
# The label a vendor's node labeller puts the accelerator product in, by the resource's domain: NVIDIA GPU
# Feature Discovery's, and AMD GPU node labeller's (k8s-device-plugin, `-product-name`).
PRODUCT_LABELS = {nvidia.DOMAIN: nvidia.PRODUCT_LABEL, amd.DOMAIN: amd.PRODUCT_LABEL}
# Labels a node carries about itself (the kubelet, or kwok for fake nodes): never a pool label.
NODE_OWN_LABELS = (HOSTNAME, kubernetes.ARCH_LABEL, kubernetes.OS_LABEL)


def level_name(key: str) -> str:
    """The short name of a topology level, used in placement policies: `trainer-platform.io/rack` → `rack`."""
    return key.rsplit("/", 1)[-1]


class Taint(StrictModel):
    key: LabelKey
    value: LabelValue = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def as_k8s(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out

    def toleration(self) -> dict[str, str]:
        """The exact toleration for this taint (Equal on the value, or Exists when it has none)."""
        if self.value:
            return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


def accelerator_taint(resource: str) -> Taint:
    """The default taint of a pool with an accelerator: keyed by its extended resource (`nvidia.com/gpu`,
    `amd.com/gpu`, …), as the vendors' device plugins and GPU operators document."""
    return Taint(key=resource, value="present", effect="NoSchedule")
