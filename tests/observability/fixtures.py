"""Hand-made platform facts for the observability tests (what alerts_test.yaml's series assume)."""

from __future__ import annotations

from typing import Any

import yaml

from trainer_infra.observability.facts import MetricsEndpoint, ObservedTeam, PlatformFacts
from trainer_infra.observability.rules import rule_groups
from trainer_infra.observability.settings import ObservabilitySettings

FACTS = PlatformFacts(
    endpoints=(
        MetricsEndpoint(
            "jobset", "jobset-system", "jobset-metrics-service", "https", (("app", "jobset"),), True, honor_labels=True
        ),
        MetricsEndpoint(
            "kueue", "kueue-system", "kueue-controller-manager-metrics-service", "https", (("app", "kueue"),), True
        ),
        MetricsEndpoint(
            "trainer", "kubeflow-system", "trainer-controller-manager", "monitoring-port", (("app", "trainer"),), False
        ),
    ),
    teams=(ObservedTeam("nlp", "team-nlp", "nlp"), ObservedTeam("vision", "team-vision", "vision")),
    pools=("h100",),
    pool_label="trainer-platform.io/node-pool",
)

SETTINGS = ObservabilitySettings.model_validate(
    {"enabled": True, "alerts": {"workloadsPending": {"teams": {"vision": "1h"}}}}
)


def rules_file(strip_annotations: bool = False) -> str:
    """The fixture's rule groups as a Prometheus rule file."""
    groups: list[dict[str, Any]] = rule_groups(FACTS, SETTINGS.alerts)
    if strip_annotations:
        groups = [
            {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]} for g in groups
        ]
    return yaml.safe_dump({"groups": groups}, sort_keys=False)
