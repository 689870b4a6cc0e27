"""Alerts on a team's TrainJobs, read from their JobSets (`jobset_failed_total{namespace}`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.observability.alerts.model import Alert, AlertBase, Duration, alert
from trainer_infra.observability.facts import PlatformFacts
from trainer_infra.observability.promql import regex, with_team


class FailureCountAlert(AlertBase):
    """At least `count` TrainJobs (their JobSets) of one team failed within `window`."""

    count: int = Field(default=3, ge=1)
    window: Duration = "1h"


def _train_job_failures(facts: PlatformFacts, fail: FailureCountAlert) -> list[dict[str, Any]]:
    if not facts.teams:
        return []
    ns = f'namespace=~"{regex([t.namespace for t in facts.teams])}"'
    metric = f"jobset_failed_total{{{ns}}}"
    # A failed JobSet adds a new series (one per JobSet name) starting at 1, which increase() cannot
    # see: count series that appeared within the window, plus older ones that went up.
    expr = (
        f"count by (namespace) (\n  ({metric} unless {metric} offset {fail.window})\n"
        f"  or (increase({metric}[{fail.window}]) > 0)\n) >= {fail.count}"
    )
    return [
        alert(
            "TrainerPlatformTrainJobsFailing",
            with_team(expr, "namespace"),
            fail.severity,
            "Team {{ $labels.team }}: {{ $value }} TrainJobs failed within " + fail.window,
            f"At least {fail.count} JobSets (one per TrainJob) in namespace {{{{ $labels.namespace }}}} "
            f"failed within {fail.window}.",
            None,
        )
    ]


TRAIN_JOB_FAILURES = Alert("train_job_failures", "trainjobs", FailureCountAlert, _train_job_failures)
