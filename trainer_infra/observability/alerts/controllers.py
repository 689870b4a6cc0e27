"""Alerts on the controllers themselves: metrics target down, failing reconciles, failing or slow webhooks.

Every metric is exported by controller-runtime in the pinned controllers or by Prometheus (`up`).
"""

from __future__ import annotations

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


def _failure_ratio(
    name: str, by: str, errors: str, total: str, s: RatioAlert, summary: str, what: str
) -> dict[str, Any]:
    """`errors` over `total` (two counter selectors) by `by`, above `s.ratio` over `s.window`, for `s.for_`."""
    return alert(
        name,
        f"sum by ({by}) (rate({errors}[{s.window}]))\n/ sum by ({by}) (rate({total}[{s.window}]))\n> {s.ratio:g}",
        s.severity,
        summary,
        f"More than {s.ratio:.0%} of {what}",
        s.for_,
    )


def _reconcile_errors(facts: PlatformFacts, rec: RatioAlert) -> list[dict[str, Any]]:
    jobs = _jobs(facts)
    return [
        _failure_ratio(
            "TrainerPlatformReconcileErrors",
            "namespace, job, controller",
            f"controller_runtime_reconcile_errors_total{{{jobs}}}",
            f"controller_runtime_reconcile_total{{{jobs}}}",
            rec,
            "Controller {{ $labels.controller }} ({{ $labels.job }}) fails reconciles",
            f"reconciles of {{{{ $labels.controller }}}} returned an error over {rec.window}, for {rec.for_}.",
        )
    ]


RECONCILE_ERRORS = Alert("reconcile_errors", "controllers", RatioAlert, _reconcile_errors)


class WebhookErrorsAlert(RatioAlert):
    """Admission requests answered with an HTTP error (the API server then applies failurePolicy)."""

    ratio: Ratio = 0.05
    window: Duration = "5m"
    for_: Duration = Field(default="10m", alias="for")


def _webhook_errors(facts: PlatformFacts, wh: WebhookErrorsAlert) -> list[dict[str, Any]]:
    jobs = _jobs(facts)
    return [
        _failure_ratio(
            "TrainerPlatformWebhookErrors",
            "namespace, job, webhook",
            f'controller_runtime_webhook_requests_total{{{jobs}, code!="200"}}',
            f"controller_runtime_webhook_requests_total{{{jobs}}}",
            wh,
            "Webhook {{ $labels.webhook }} ({{ $labels.job }}) answers with HTTP errors",
            f"admission requests to {{{{ $labels.webhook }}}} failed over {wh.window}, for {wh.for_}: creates "
            "and updates of its objects fail or bypass validation.",
        )
    ]


WEBHOOK_ERRORS = Alert("webhook_errors", "controllers", WebhookErrorsAlert, _webhook_errors)


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
