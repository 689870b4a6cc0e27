"""Names Kubeflow Trainer v2 defines (kubeflow/trainer `pkg/constants`, `pkg/apis/trainer`, the Python SDK)."""

from __future__ import annotations

from trainer_infra.core.upstream import nvidia

#: The API group of TrainJobs and (Cluster)TrainingRuntimes (version: the matrix's `apiVersions`).
GROUP = "trainer.kubeflow.org"
#: The runtime label naming its ML framework (`torch`, `deepspeed`, …).
FRAMEWORK_LABEL = f"{GROUP}/framework"
#: On the Job template of a replicatedJob: the step it runs, read by the webhook and the SDK.
ANCESTOR_LABEL = f"{GROUP}/trainjob-ancestor-step"
#: The runtime label marking its support status (`deprecated`).
SUPPORT_LABEL = f"{GROUP}/support"
#: The limits the kubeflow SDK (get_container_devices in kubeflow/trainer/backends/kubernetes/utils.py, as
#: pinned by the test extra in pyproject.toml) reads a trainer's device from; a `node` container with limits
#: but none of these (e.g. only `amd.com/gpu`) makes it raise "Unknown device type", so
#: TrainerClient().list_runtimes() fails for every runtime of the namespace.
SDK_DEVICE_LIMITS = (nvidia.GPU, "google.com/tpu", "huawei.com/Ascend910", "cpu")
SDK_DEVICE_PREFIXES = (nvidia.MIG_PREFIX,)
