"""Names AMD's device plugin and GPU node labeller define (ROCm/k8s-device-plugin)."""

from __future__ import annotations

DOMAIN = "amd.com"
#: The extended resource of a GPU.
GPU = f"{DOMAIN}/gpu"
#: The node label the AMD GPU node labeller writes the product into.
PRODUCT_LABEL = f"{DOMAIN}/gpu.product-name"
