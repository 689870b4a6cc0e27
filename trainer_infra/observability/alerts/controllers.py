"""Alerts on the controllers themselves: metrics target down, failing reconciles, failing or slow webhooks.

Every metric is exported by controller-runtime in the pinned controllers or by Prometheus (`up`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.observability.alerts.model import Alert, AlertBase, Duration, Ratio, Severity, alert
from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.promql import regex


def _jobs(facts: PlatformFacts) -> str:
    return f'job=~"{regex([e.service for e in facts.endpoints])}"'


class ControllerDownAlert(AlertBase):
    """No healthy metrics target of a controller (pod down, not Ready, or scrape failing)."""

    severity: Severity = "critical"
    for_: Duration = Field(default="5m", alias="for")


def _controller_down(facts: PlatformFacts, down: ControllerDownAlert) -> list[dict[str, Any]]:
    rules = []
    for e in sorted(facts.endpoints, key=lambda e: e.component):
        target = f'job="{e.service}", namespace="{e.namespace}"'
        rule = alert(
            "TrainerPlatformControllerDown",
            # absent(): no target at all (no Ready pod behind the Service); == 0: scrapes fail
            f"max by (namespace, job) (up{{{target}}}) == 0 or absent(up{{{target}}})",
            down.severity,
            f"The {e.component} controller has no healthy metrics target",
            f"No Ready {e.component} pod in {e.namespace} answered a scrape for {down.for_}: its webhooks "
            "and reconciliation are down or degraded.",
            down.for_,
        )
        rule["labels"]["component"] = e.component
        rules.append(rule)
    return rules


CONTROLLER_DOWN = Alert("controller_down", "controllers", ControllerDownAlert, _controller_down)


class RatioAlert(AlertBase):
    """A failure ratio over a rate window, sustained for `for`."""

    ratio: Ratio = 0.1
    window: Duration = "10m"
    for_: Duration = Field(default="15m", alias="for")


def _reconcile_errors(facts: PlatformFacts, rec: RatioAlert) -> list[dict[str, Any]]:
    by, jobs = "namespace, job, controller", _jobs(facts)
    return [
        alert(
            "TrainerPlatformReconcileErrors",
            f"sum by ({by}) (rate(controller_runtime_reconcile_errors_total{{{jobs}}}[{rec.window}]))\n"
            f"/ sum by ({by}) (rate(controller_runtime_reconcile_total{{{jobs}}}[{rec.window}]))\n"
            f"> {rec.ratio:g}",
            rec.severity,
            "Controller {{ $labels.controller }} ({{ $labels.job }}) fails reconciles",
            f"More than {rec.ratio:.0%} of reconciles of {{{{ $labels.controller }}}} returned an error "
            f"over {rec.window}, for {rec.for_}.",
            rec.for_,
        )
    ]


RECONCILE_ERRORS = Alert("reconcile_errors", "controllers", RatioAlert, _reconcile_errors)


class WebhookErrorsAlert(RatioAlert):
    """Admission requests answered with an HTTP error (the API server then applies failurePolicy)."""

    ratio: Ratio = 0.05
    window: Duration = "5m"
    for_: Duration = Field(default="10m", alias="for")


def _webhook_errors(facts: PlatformFacts, wh: WebhookErrorsAlert) -> list[dict[str, Any]]:
    by, jobs = "namespace, job, webhook", _jobs(facts)
    return [
        alert(
            "TrainerPlatformWebhookErrors",
            f'sum by ({by}) (rate(controller_runtime_webhook_requests_total{{{jobs}, code!="200"}}[{wh.window}]))\n'
            f"/ sum by ({by}) (rate(controller_runtime_webhook_requests_total{{{jobs}}}[{wh.window}]))\n"
            f"> {wh.ratio:g}",
            wh.severity,
            "Webhook {{ $labels.webhook }} ({{ $labels.job }}) answers with HTTP errors",
            f"More than {wh.ratio:.0%} of admission requests to {{{{ $labels.webhook }}}} failed over "
            f"{wh.window}, for {wh.for_}: creates and updates of its objects fail or bypass validation.",
            wh.for_,
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
