"""The `observability` stack block: Prometheus Operator objects, alert thresholds, dashboards.

Off unless `enabled`; nothing here changes scheduling (only Kueue's metric settings reach a controller).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel

_DURATION = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _check_duration(value: str) -> str:
    if not _DURATION.match(value) or duration_seconds(value) <= 0:
        raise ValueError(f"expected a positive Prometheus duration such as 30s, 5m, 1h30m; found {value!r}")
    return value


def duration_seconds(value: str) -> float:
    """Seconds in a Prometheus duration (`1h30m` → 5400)."""
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)(ms|s|m|h|d|w|y)", value))


Duration = Annotated[str, AfterValidator(_check_duration)]
Ratio = Annotated[float, Field(gt=0, le=1)]
Severity = Annotated[str, Field(pattern=r"^(critical|warning|info)$")]


class AlertBase(StrictModel):
    enabled: bool = True
    severity: Severity = "warning"


class ControllerDownAlert(AlertBase):
    """No healthy metrics target of a controller (pod down, not Ready, or scrape failing)."""

    severity: Severity = "critical"
    for_: Duration = Field(default="5m", alias="for")


class RatioAlert(AlertBase):
    """A failure ratio over a rate window, sustained for `for`."""

    ratio: Ratio = 0.1
    window: Duration = "10m"
    for_: Duration = Field(default="15m", alias="for")


class WebhookErrorsAlert(RatioAlert):
    """Admission requests answered with an HTTP error (the API server then applies failurePolicy)."""

    ratio: Ratio = 0.05
    window: Duration = "5m"
    for_: Duration = Field(default="10m", alias="for")


class WebhookLatencyAlert(AlertBase):
    """p99 admission latency of a controller's webhooks above `seconds`."""

    seconds: float = Field(default=1.0, gt=0)
    window: Duration = "10m"
    for_: Duration = Field(default="10m", alias="for")


class PendingAlert(AlertBase):
    """Workloads pending while the team's ClusterQueue admitted nothing for `for` (per-team overrides)."""

    for_: Duration = Field(default="30m", alias="for")
    teams: dict[str, Duration] = Field(
        default_factory=dict, description="Per-team `for`, keyed by team name (unknown teams are errors)."
    )


class QuotaAlert(AlertBase):
    """A ClusterQueue's reserved quota at or above `ratio` of nominal while work is pending."""

    ratio: Ratio = 0.95
    for_: Duration = Field(default="30m", alias="for")


class BorrowingAlert(AlertBase):
    """Borrowed quota (reserved above nominal) above `ratio` of nominal."""

    ratio: float = Field(default=0.5, gt=0)
    for_: Duration = Field(default="1h", alias="for")


class FailureCountAlert(AlertBase):
    """At least `count` TrainJobs (their JobSets) of one team failed within `window`."""

    count: int = Field(default=3, ge=1)
    window: Duration = "1h"


class InactiveAlert(AlertBase):
    """A team's ClusterQueue not `active` (e.g. a missing ResourceFlavor): nothing it holds is admitted."""

    for_: Duration = Field(default="10m", alias="for")


class NodesNotReadyAlert(AlertBase):
    """At least `count` nodes of one pool NotReady for `for` (needs kube-state-metrics, see README)."""

    severity: Severity = "critical"
    count: int = Field(default=1, ge=1)
    for_: Duration = Field(default="10m", alias="for")


class Alerts(StrictModel):
    controller_down: ControllerDownAlert = Field(default_factory=ControllerDownAlert)
    reconcile_errors: RatioAlert = Field(default_factory=RatioAlert)
    webhook_errors: WebhookErrorsAlert = Field(default_factory=WebhookErrorsAlert)
    webhook_latency: WebhookLatencyAlert = Field(default_factory=WebhookLatencyAlert)
    workloads_pending: PendingAlert = Field(default_factory=PendingAlert)
    quota_saturated: QuotaAlert = Field(default_factory=QuotaAlert)
    borrowing: BorrowingAlert = Field(default_factory=BorrowingAlert)
    train_job_failures: FailureCountAlert = Field(default_factory=FailureCountAlert)
    cluster_queue_inactive: InactiveAlert = Field(default_factory=InactiveAlert)
    pool_nodes_not_ready: NodesNotReadyAlert = Field(default_factory=NodesNotReadyAlert)


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
