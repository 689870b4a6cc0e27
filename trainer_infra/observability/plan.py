"""The observability block → plan objects, and the gate that refuses a cluster without the Prometheus
Operator's CRDs before any of them is applied."""

from __future__ import annotations

from trainer_infra.core.objects import ManagedObject, PlanPart, ReadinessGate
from trainer_infra.core.upstream.prometheus_operator import GROUP as MONITORING_GROUP
from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.objects import observability_objects
from trainer_infra.observability.settings import ObservabilitySettings

#: The monitoring.coreos.com kinds we create (prometheus-operator v0.85.0 serves them at v1).
MONITORING_CRDS = (f"servicemonitors.{MONITORING_GROUP}", f"prometheusrules.{MONITORING_GROUP}")
CRD_HINT = (
    "observability needs the Prometheus Operator's CRDs (ServiceMonitor, PrometheusRule) on the cluster: "
    "install the Prometheus Operator (e.g. kube-prometheus-stack) first, or set observability.enabled: false"
)


def crd_gate() -> ReadinessGate:
    """Checked before our monitoring objects are applied: not installed by us, so a short wait, then a
    refusal that says what to do (instead of a provider error about an unknown kind)."""
    return ReadinessGate(
        name="prometheus-operator-crds",
        component="prometheus-operator",
        release="",
        crds=MONITORING_CRDS,
        probes=(),
        version="v1",
        api_groups=(MONITORING_GROUP,),
        timeout_seconds=60,
        hint=CRD_HINT,
    )


def observability_plan(settings: ObservabilitySettings, facts: PlatformFacts) -> PlanPart:
    if not settings.enabled:
        return PlanPart()
    # The Kubernetes provider replaces a ConfigMap whose data changed (ConfigMaps are immutable to it unless
    # `enableConfigMapMutable`), and a dashboard's data changes with the teams: with a fixed name the replacement
    # must delete first, or the `up` that adds a team fails with "already exists" (found by the e2e).
    objects = tuple(
        ManagedObject(obj, delete_before_replace=obj["kind"] == "ConfigMap")
        for obj in observability_objects(facts, settings)
    )
    return PlanPart(gates=(crd_gate(),), objects=objects)
