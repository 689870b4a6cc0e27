"""Kubeflow Trainer: the controller that owns TrainJobs and the (Cluster)TrainingRuntime API."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from trainer_infra.config.images import mirror_image
from trainer_infra.controllers.common import ControllerConfig, deep_merge, split_image

CHART_RUNTIMES = ("torchDistributed", "deepspeedDistributed", "mlxDistributed", "jaxDistributed", "xgboostDistributed")
TORCHTUNE_MODELS = ("llama3_2_1B", "llama3_2_3B", "qwen2_5_1_5B")


class TrainerConfig(ControllerConfig):
    """Kubeflow Trainer controller (chart `kubeflow-trainer`). The chart's JobSet subchart and its
    runtime-installer hook stay off: we install JobSet ourselves and own the runtime catalog."""


def trainer_values(cfg: TrainerConfig, version: str, mirror: str | None) -> dict[str, Any]:
    image = mirror_image(f"ghcr.io/kubeflow/trainer/trainer-controller-manager:v{version}", mirror)
    repo, tag = split_image(image)
    registry, _, repository = repo.partition("/")
    values: dict[str, Any] = {
        "image": {"registry": registry, "repository": repository, "tag": tag},
        "jobset": {"install": False},
        # Every chart runtime off: the catalog (runtimes/) owns them, and v2.3 would install them
        # with a hook Job that needs internet and that helm.v4.Chart never runs.
        "runtimes": {
            "defaultEnabled": False,
            **{name: {"enabled": False} for name in CHART_RUNTIMES},
            "torchtuneDistributed": {f: {"enabled": False} for f in TORCHTUNE_MODELS},
        },
        "manager": {"replicas": cfg.replicas, "resources": cfg.resources.as_k8s()},
    }
    if Version(version) >= Version("2.3.0"):
        # v2.3 renders its CRDs from templates/ behind crds.enabled (v2.2 keeps them in crds/).
        values["crds"] = {"enabled": True}
    if cfg.feature_gates:
        values["manager"]["config"] = {"featureGates": dict(sorted(cfg.feature_gates.items()))}
    return deep_merge(values, cfg.values)
