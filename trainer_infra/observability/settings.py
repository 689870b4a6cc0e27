"""The `observability` stack block: Prometheus Operator objects, alert thresholds, dashboards.

Off unless `enabled`; nothing here changes scheduling (only Kueue's metric settings reach a controller).
"""

from __future__ import annotations

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel
from trainer_infra.observability.alerts.model import Duration
from trainer_infra.observability.alerts.registry import Alerts


class ServiceAccountRef(StrictModel):
    namespace: str = "monitoring"
    name: str = "prometheus-k8s"


class PrometheusSettings(StrictModel):
    """The Prometheus (Operator) that scrapes the controllers and loads the rules."""

    service_account: ServiceAccountRef = Field(
        default_factory=ServiceAccountRef,
        description="Prometheus's ServiceAccount: granted `get /metrics` on the controllers.",
    )
    selector_labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels your Prometheus selects ServiceMonitors and PrometheusRules by "
        "(kube-prometheus-stack: `release: <its release name>`).",
    )
    scrape_interval: Duration = "30s"


class GrafanaSettings(StrictModel):
    """Dashboards as ConfigMaps the Grafana sidecar picks up."""

    dashboards: bool = True
    sidecar_labels: dict[str, str] = Field(default_factory=lambda: {"grafana_dashboard": "1"})
    folder: str = Field(default="Trainer platform", description="Set as the `grafana_folder` annotation.")


class ObservabilitySettings(StrictModel):
    """`observability`: metrics, alerts and dashboards for Trainer, JobSet, Kueue and the team queues."""

    enabled: bool = False
    namespace: DnsLabel = Field(
        default="trainer-platform-monitoring",
        description="Holds rules and dashboards; created and owned by the platform, so never your "
        "Prometheus's own namespace.",
    )
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    grafana: GrafanaSettings = Field(default_factory=GrafanaSettings)
    alerts: Alerts = Field(default_factory=Alerts)
