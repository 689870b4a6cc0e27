"""Observability settings that cannot work with this stack, each with its config path."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core.errors import ConfigIssue, did_you_mean
from trainer_infra.observability.alerts.queues import WORKLOADS_PENDING
from trainer_infra.observability.settings import ObservabilitySettings


def check_observability(settings: ObservabilitySettings, teams: Sequence[str]) -> list[ConfigIssue]:
    """A per-team threshold must name a team of the stack (a typo would silently use the default)."""
    issues = []
    for name in WORKLOADS_PENDING.settings(settings.alerts).teams:
        if name not in teams:
            issues.append(
                ConfigIssue(
                    f"observability.alerts.workloadsPending.teams.{name}",
                    "no team of this name",
                    name,
                    did_you_mean(name, teams) or f"teams are: {', '.join(sorted(teams)) or '(none)'}",
                )
            )
    return issues
