"""Kubeflow Trainer: the controller that owns TrainJobs and the (Cluster)TrainingRuntime API."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from trainer_infra.components.component import Controller, ResolvedRelease, StackView
from trainer_infra.components.settings import PROBE_NAME, ControllerConfig, deep_merge, probe_pod
from trainer_infra.core.images import split_image
from trainer_infra.core.upstream import kubernetes
from trainer_infra.datacache.chart import data_cache_values
from trainer_infra.manifests.runtime import minimal_runtime
from trainer_infra.observability.facts import MetricsEndpoint

CHART_RUNTIMES = ("torchDistributed", "deepspeedDistributed", "mlxDistributed", "jaxDistributed", "xgboostDistributed")
TORCHTUNE_MODELS = ("llama3_2_1B", "llama3_2_3B", "qwen2_5_1_5B")


class TrainerConfig(ControllerConfig):
    """Kubeflow Trainer controller (chart `kubeflow-trainer`). The chart's JobSet subchart and its
    runtime-installer hook stay off: we install JobSet ourselves and own the runtime catalog."""


def trainer_values(cfg: TrainerConfig, release: ResolvedRelease) -> dict[str, Any]:
    repo, tag = split_image(release.image("manager"))
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
        "manager": {"replicas": cfg.replicas, "resources": cfg.resources.as_chart_values()},
    }
    if Version(release.app_version) >= Version("2.3.0"):
        # v2.3 renders its CRDs from templates/ behind crds.enabled (v2.2 keeps them in crds/).
        values["crds"] = {"enabled": True}
    if cfg.feature_gates:
        values["manager"]["config"] = {"featureGates": dict(sorted(cfg.feature_gates.items()))}
    return deep_merge(values, cfg.values)


class Trainer(Controller):
    name = "trainer"
    settings_model = TrainerConfig
    after = ("jobset",)

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        # Data cache values first, so the component's escape hatch still wins.
        cache = data_cache_values(
            stack.data_cache, release.app_version, release.image("lws"), stack.images.registry_mirror
        )
        if stack.data_cache.enabled and stack.data_cache.install_lws:
            # The LWS subchart's controller gets the same resources as ours (its chart default has no limit).
            resources = stack.components.trainer.resources.as_chart_values()
            cache = deep_merge(cache, {"lws": {"resources": resources}})
        return deep_merge(cache, trainer_values(stack.components.trainer, release))

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint:
        """Chart templates/manager/service.yaml: `<fullname>-controller-manager` (fullname
        `<release>-kubeflow-trainer`), port `monitoring-port` (8443). Secure serving without the
        authn/authz filter (pkg/config/config.go in 2.2.1 and 2.3.0), so no token is needed."""
        selector = {kubernetes.APP_NAME: "kubeflow-trainer", kubernetes.APP_INSTANCE: self.name}
        selector[kubernetes.APP_COMPONENT] = "manager"
        service = f"{self.name}-kubeflow-trainer-controller-manager"
        return MetricsEndpoint(self.name, release.namespace, service, "monitoring-port", tuple(selector.items()), False)

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return (minimal_runtime(PROBE_NAME, {"image": probe_pod(mirror)["containers"][0]["image"]}),)


COMPONENT = Trainer()
