"""Alerts on the controllers themselves: metrics target down, failing reconciles, failing or slow webhooks.

Every metric is exported by controller-runtime in the pinned controllers or by Prometheus (`up`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from trainer_infra.observability.alerts.model import Alert, AlertBase, Duration, Ratio, Severity, alert
from trainer_infra.observability.facts import MetricsEndpoint, PlatformFacts
from trainer_infra.observability.promql import regex


def _jobs(facts: PlatformFacts) -> str:
    return f'job=~"{regex([e.service for e in facts.endpoints])}"'


class ControllerDownAlert(AlertBase):
    """No healthy metrics target of a controller (pod down, not Ready, or scrape failing)."""

    severity: Severity = "critical"
    for_: Duration = Field(default="5m", alias="for")


def _controller_down(facts: PlatformFacts, down: ControllerDownAlert) -> list[dict[str, Any]]:
    def target(e: MetricsEndpoint) -> str:
        return f'job="{e.service}", namespace="{e.namespace}"'

    return [
        alert(
            "TrainerPlatformControllerDown",
            # absent(): no target at all (no Ready pod behind the Service); == 0: scrapes fail
            f"max by (namespace, job) (up{{{target(e)}}}) == 0 or absent(up{{{target(e)}}})",
            down.severity,
            f"The {e.component} controller has no healthy metrics target",
            f"No Ready {e.component} pod in {e.namespace} answered a scrape for {down.for_}: its webhooks "
            "and reconciliation are down or degraded.",
            down.for_,
            component=e.component,
        )
        for e in sorted(facts.endpoints, key=lambda e: e.component)
    ]


CONTROLLER_DOWN = Alert("controller_down", "controllers", ControllerDownAlert, _controller_down)


class RatioAlert(AlertBase):
    """A failure ratio over a rate window, sustained for `for`."""

    ratio: Ratio = 0.1
    window: Duration = "10m"
    for_: Duration = Field(default="15m", alias="for")


@dataclass(frozen=True)
class _FailureRatio:
    """One rule: the rate of the `errors` counter over that of `total`, of the controllers' jobs, by `by`, above
    `ratio` over `window`, for `for`."""

    name: str
    by: str
    errors: str  # a counter
    total: str
    summary: str
    failed: str  # what failed, as the description says it
    consequence: str = ""
    error_matchers: str = ""  # more label matchers of `errors` (`code!="200"`)

    def __call__(self, facts: PlatformFacts, s: RatioAlert) -> list[dict[str, Any]]:
        def rate(counter: str, matchers: str = "") -> str:
            selector = ", ".join(m for m in (_jobs(facts), matchers) if m)
            return f"sum by ({self.by}) (rate({counter}{{{selector}}}[{s.window}]))"

        description = f"More than {s.ratio:.0%} of {self.failed} over {s.window}, for {s.for_}{self.consequence}."
        expr = f"{rate(self.errors, self.error_matchers)}\n/ {rate(self.total)}\n> {s.ratio:g}"
        return [alert(self.name, expr, s.severity, self.summary, description, s.for_)]


RECONCILE_ERRORS = Alert(
    "reconcile_errors",
    "controllers",
    RatioAlert,
    _FailureRatio(
        "TrainerPlatformReconcileErrors",
        by="namespace, job, controller",
        errors="controller_runtime_reconcile_errors_total",
        total="controller_runtime_reconcile_total",
        summary="Controller {{ $labels.controller }} ({{ $labels.job }}) fails reconciles",
        failed="reconciles of {{ $labels.controller }} returned an error",
    ),
)


class WebhookErrorsAlert(RatioAlert):
    """Admission requests answered with an HTTP error (the API server then applies failurePolicy)."""

    ratio: Ratio = 0.05
    window: Duration = "5m"
    for_: Duration = Field(default="10m", alias="for")


WEBHOOK_ERRORS = Alert(
    "webhook_errors",
    "controllers",
    WebhookErrorsAlert,
    _FailureRatio(
        "TrainerPlatformWebhookErrors",
        by="namespace, job, webhook",
        errors="controller_runtime_webhook_requests_total",
        total="controller_runtime_webhook_requests_total",
        summary="Webhook {{ $labels.webhook }} ({{ $labels.job }}) answers with HTTP errors",
        failed="admission requests to {{ $labels.webhook }} failed",
        consequence=": creates and updates of its objects fail or bypass validation",
        error_matchers='code!="200"',
    ),
)


class WebhookLatencyAlert(AlertBase):
    """p99 admission latency of a controller's webhooks above `seconds`."""

    seconds: float = Field(default=1.0, gt=0)
    window: Duration = "10m"
    for_: Duration = Field(default="10m", alias="for")


def _webhook_latency(facts: PlatformFacts, lat: WebhookLatencyAlert) -> list[dict[str, Any]]:
    return [
        alert(
            "TrainerPlatformWebhookSlow",
            "histogram_quantile(0.99, sum by (namespace, job, webhook, le) "
            f"(rate(controller_runtime_webhook_latency_seconds_bucket{{{_jobs(facts)}}}[{lat.window}])))\n"
            f"> {lat.seconds:g}",
            lat.severity,
            "Webhook {{ $labels.webhook }} ({{ $labels.job }}) is slow",
            f"p99 admission latency above {lat.seconds:g}s over {lat.window}, for {lat.for_}; the API server "
            "times out webhook calls after the configuration's timeoutSeconds (at most 30s).",
            lat.for_,
        )
    ]


WEBHOOK_LATENCY = Alert("webhook_latency", "controllers", WebhookLatencyAlert, _webhook_latency)
