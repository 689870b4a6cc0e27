"""Environment variables that select accelerators by name on the node, past the device plugin's allocation.

The NVIDIA container toolkit reads `NVIDIA_VISIBLE_DEVICES` (and `NVIDIA_DRIVER_CAPABILITIES`, `NVIDIA_MIG_*`,
`NVIDIA_REQUIRE_*`...) from the container's environment and, unless configured with
`accept-nvidia-visible-devices-envvar-when-unprivileged = false`, mounts the GPUs it names: `all` gives a pod
that requested no GPU every GPU of its node, other teams' included, charged to nobody. AMD's container toolkit
(`AMD_VISIBLE_DEVICES`) and Habana's runtime (`HABANA_VISIBLE_DEVICES`, `HABANA_VISIBLE_MODULES`) do the same;
ROCm's `ROCR_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL` steer which devices a ROCm process
opens. No honest job needs them: the device plugin sets the allocation. `CUDA_VISIBLE_DEVICES` is allowed: the
CUDA runtime reads it inside the container, after the runtime mounted the charged GPUs, so it can only narrow or
reorder them, and launchers (torchrun, accelerate) set it per local rank.
"""

from __future__ import annotations

GPU_ENV_PREFIXES = ("NVIDIA_",)
#: With `deviceListStrategy: volume-mounts` the toolkit reads the allocation from mount *destinations* under
#: this directory, whatever their source: an `emptyDir` mounted at `.../all` would name every GPU.
#: (Refused as a substring of any mount path: `..` and doubled slashes are not normalised by the API server.)
DEVICE_LIST_DIR = "nvidia-container-devices"
GPU_ENV_NAMES = (
    "AMD_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HABANA_VISIBLE_DEVICES",
    "HABANA_VISIBLE_MODULES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)
