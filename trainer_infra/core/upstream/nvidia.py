"""Names NVIDIA's device plugin and GPU Feature Discovery define."""

from __future__ import annotations

DOMAIN = "nvidia.com"
#: The extended resource of a whole GPU (k8s-device-plugin).
GPU = f"{DOMAIN}/gpu"
#: The prefix of a MIG slice's resource under the `mixed` strategy (`nvidia.com/mig-1g.10gb`, …).
MIG_PREFIX = f"{DOMAIN}/mig-"
#: The node label GPU Feature Discovery writes the product into.
PRODUCT_LABEL = f"{DOMAIN}/gpu.product"
