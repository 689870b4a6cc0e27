"""Kubeflow Trainer: the controller that owns TrainJobs and the (Cluster)TrainingRuntime API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.version import Version
from pydantic import Field

from trainer_infra.components.component import Controller, ResolvedRelease, StackView
from trainer_infra.components.settings import PROBE_NAME, ControllerConfig, deep_merge, probe_pod
from trainer_infra.core.images import split_image
from trainer_infra.core.upstream import kubernetes, trainer
from trainer_infra.datacache.chart import data_cache_values
from trainer_infra.manifests.runtime import minimal_runtime
from trainer_infra.observability.facts import MetricsEndpoint

CHART_RUNTIMES = ("torchDistributed", "deepspeedDistributed", "mlxDistributed", "jaxDistributed", "xgboostDistributed")
TORCHTUNE_MODELS = ("llama3_2_1B", "llama3_2_3B", "qwen2_5_1_5B")


class TrainerConfig(ControllerConfig):
    """Kubeflow Trainer controller (chart `kubeflow-trainer`). The chart's JobSet subchart and its
    runtime-installer hook stay off: we install JobSet ourselves and own the runtime catalog."""

    progress: bool | None = Field(
        default=None,
        description="Progress and ETA of TrainJobs: turns on Trainer's TrainJobStatus feature gate (alpha upstream, "
        "KEP-2779), whose status server in the controller takes a job's progress, ETA and metrics into "
        "`status.trainerStatus`; the teams' training pods may reach its port (only that one) and carry the token "
        "and env Trainer injects. Default: on where the installed Trainer release has the gate.",
    )


def trainer_settings(stack: StackView) -> TrainerConfig:
    """`components.trainer`, typed (the components model is built from the registry)."""
    settings: TrainerConfig = stack.components.trainer
    return settings


def progress_on(cfg: TrainerConfig, release: ResolvedRelease) -> bool:
    """Whether the status server runs: the setting, or by default whether the release has the gate."""
    if cfg.progress is not None:
        return cfg.progress
    return release.feature_gates is not None and trainer.STATUS_GATE in release.feature_gates


@dataclass(frozen=True)
class StatusServer:
    """Where the installed chart serves the status server: the manager's pods (namespace, selector labels)
    behind the webhook Service, which is what Trainer writes into the pods' URL (trainjobstatus.go
    createEnvVars: `https://<certManagement.webhookServiceName>.<namespace>.svc:<port>`)."""

    namespace: str
    service: str
    pod_labels: tuple[tuple[str, str], ...]
    port: int = trainer.STATUS_PORT

    @property
    def base_url(self) -> str:
        return f"https://{self.service}.{self.namespace}.svc:{self.port}"


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
    gates = {**cfg.feature_gates, **({trainer.STATUS_GATE: True} if progress_on(cfg, release) else {})}
    if gates:
        values["manager"]["config"] = {"featureGates": dict(sorted(gates.items()))}
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
        server = self.status_server(release)
        return MetricsEndpoint(
            self.name, release.namespace, server.service, "monitoring-port", server.pod_labels, False
        )

    def status_server(self, release: ResolvedRelease) -> StatusServer:
        """The chart's manager Service (templates/manager/service.yaml, which also serves the webhook and the
        status server) and its pods' selector labels (templates/manager/_helpers.tpl selectorLabels)."""
        selector = {kubernetes.APP_NAME: "kubeflow-trainer", kubernetes.APP_INSTANCE: self.name}
        selector[kubernetes.APP_COMPONENT] = "manager"
        service = f"{self.name}-kubeflow-trainer-controller-manager"
        return StatusServer(release.namespace, service, tuple(selector.items()))

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return (minimal_runtime(PROBE_NAME, {"image": probe_pod(mirror)["containers"][0]["image"]}),)


COMPONENT = Trainer()
