"""JobSet: the controller Trainer turns every TrainJob into. Config and chart values live together."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from trainer_infra.components.component import Controller, ResolvedRelease, StackView
from trainer_infra.components.settings import PROBE_NAME, ControllerConfig, deep_merge, probe_pod
from trainer_infra.core.images import split_image
from trainer_infra.core.upstream import jobset, kubernetes
from trainer_infra.manifests import meta
from trainer_infra.observability.facts import MetricsEndpoint


class JobSetConfig(ControllerConfig):
    """JobSet controller (chart `jobset`). Installed by us, never by the Trainer chart's subchart."""

    @field_validator("feature_gates")
    @classmethod
    def _no_gates(cls, gates: dict[str, bool]) -> dict[str, bool]:
        if gates:
            raise ValueError(
                "the JobSet chart has no featureGates value "
                "(pass controller flags through `values` if you really need one)"
            )
        return gates


def jobset_values(cfg: JobSetConfig, release: ResolvedRelease) -> dict[str, Any]:
    repo, tag = split_image(release.image("manager"))
    values: dict[str, Any] = {
        "image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
        "controller": {"replicas": cfg.replicas, "resources": cfg.resources.as_chart_values()},
    }
    return deep_merge(values, cfg.values)


class JobSet(Controller):
    name = "jobset"
    settings_model = JobSetConfig
    after: tuple[str, ...] = ()

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        return jobset_values(stack.components.jobset, release)

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint:
        """Chart templates/prometheus/manager_metrics_service.yaml: `<fullname>-metrics-service`, port
        `https` (8443); the manager puts controller-runtime's authn/authz filter in front (main.go)."""
        selector = {kubernetes.APP_NAME: "jobset", kubernetes.APP_INSTANCE: self.name}
        selector[kubernetes.APP_COMPONENT] = "controller"
        service = f"{self.name}-metrics-service"
        # jobset_{failed,completed}_total{namespace} is the JobSet's namespace: the team alerts read it.
        return MetricsEndpoint(
            self.name, release.namespace, service, "https", tuple(selector.items()), True, honor_labels=True
        )

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        replicated = {"name": "probe", "replicas": 1, "template": {"spec": {"template": {"spec": probe_pod(mirror)}}}}
        return (
            {
                "apiVersion": release.api_versions[jobset.GROUP],
                "kind": "JobSet",
                "metadata": meta.metadata(PROBE_NAME, release.namespace),
                "spec": {"replicatedJobs": [replicated]},
            },
        )


COMPONENT = JobSet()
