"""Kubernetes objects of the observability block: ServiceMonitors, scrape RBAC, rules, dashboards.

ServiceMonitors are ours for all three controllers, not the charts': the JobSet chart's template
`fail`s unless Helm sees the monitoring API (Pulumi renders charts without cluster capabilities),
the Kueue and JobSet charts bind their metrics Role to a fixed `prometheus-k8s` ServiceAccount and
cannot label their monitors for a Prometheus `serviceMonitorSelector`, and the Trainer chart has
none (kubeflow/trainer#3429). One shape for all three is also one thing to test.
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.upstream import kubernetes, prometheus_operator
from trainer_infra.manifests import meta
from trainer_infra.observability.dashboards import dashboard_text, dashboards
from trainer_infra.observability.facts import MetricsEndpoint, PlatformFacts
from trainer_infra.observability.rules import rule_groups
from trainer_infra.observability.settings import ObservabilitySettings

MONITORING = prometheus_operator.MONITORING_API
METRICS_READER = "trainer-platform-metrics-reader"
RULES_NAME = "trainer-platform"
COMPONENT_LABEL = "trainer-platform.io/observability"


def service_monitor(endpoint: MetricsEndpoint, settings: ObservabilitySettings) -> dict[str, Any]:
    """Scrape one controller's secure metrics port.

    The controllers serve /metrics over TLS with a self-signed certificate (no cert-manager here), so
    the scraper cannot verify it: `insecureSkipVerify`. JobSet and Kueue put controller-runtime's
    authn/authz filter in front (TokenReview + SubjectAccessReview on `get /metrics`): Prometheus sends
    its ServiceAccount token, which the ClusterRoleBinding below authorizes. Trainer 2.2.1 has no
    filter, so no token is sent there.
    """
    ep: dict[str, Any] = {
        "port": endpoint.port,
        "path": "/metrics",
        "scheme": "https",
        "interval": settings.prometheus.scrape_interval,
        "tlsConfig": {"insecureSkipVerify": True},
    }
    if endpoint.authenticated:
        ep["bearerTokenFile"] = kubernetes.SERVICE_ACCOUNT_TOKEN_PATH  # a Prometheus mounts its own token there
    if endpoint.honor_labels:
        ep["honorLabels"] = True
    return {
        "apiVersion": MONITORING,
        "kind": "ServiceMonitor",
        "metadata": meta.metadata(
            f"trainer-platform-{endpoint.component}",
            endpoint.namespace,
            labels={**settings.prometheus.selector_labels, COMPONENT_LABEL: endpoint.component},
        ),
        "spec": {
            "selector": {"matchLabels": dict(endpoint.selector)},
            "namespaceSelector": {"matchNames": [endpoint.namespace]},
            "endpoints": [ep],
        },
    }


def scrape_rbac(settings: ObservabilitySettings) -> list[dict[str, Any]]:
    """`get /metrics` for Prometheus's ServiceAccount: what the controllers' authz filter checks."""
    sa = settings.prometheus.service_account
    return [
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": "ClusterRole",
            "metadata": meta.metadata(METRICS_READER),
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": "ClusterRoleBinding",
            "metadata": meta.metadata(METRICS_READER),
            "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": "ClusterRole", "name": METRICS_READER},
            "subjects": [{"kind": "ServiceAccount", "name": sa.name, "namespace": sa.namespace}],
        },
    ]


def prometheus_rule(facts: PlatformFacts, settings: ObservabilitySettings) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING,
        "kind": "PrometheusRule",
        "metadata": meta.metadata(RULES_NAME, settings.namespace, labels=dict(settings.prometheus.selector_labels)),
        "spec": {"groups": rule_groups(facts, settings.alerts)},
    }


def dashboard_config_maps(facts: PlatformFacts, settings: ObservabilitySettings) -> list[dict[str, Any]]:
    """One ConfigMap per dashboard, labelled for the Grafana sidecar (kube-prometheus-stack's default label)."""
    if not settings.grafana.dashboards:
        return []
    maps = []
    for filename, dashboard in dashboards(facts).items():
        maps.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": meta.metadata(
                    filename.removesuffix(".json"),
                    settings.namespace,
                    labels=dict(settings.grafana.sidecar_labels),
                    annotations={"grafana_folder": settings.grafana.folder},
                ),
                "data": {filename: dashboard_text(dashboard)},
            }
        )
    return maps


def observability_objects(facts: PlatformFacts, settings: ObservabilitySettings) -> list[dict[str, Any]]:
    """Every object of the block, in a fixed order (empty when the block is off)."""
    if not settings.enabled:
        return []
    return [
        meta.namespace(settings.namespace),
        *scrape_rbac(settings),
        *(service_monitor(e, settings) for e in sorted(facts.endpoints, key=lambda e: e.component)),
        prometheus_rule(facts, settings),
        *dashboard_config_maps(facts, settings),
    ]
