"""What an alert is made of: its settings (thresholds under `observability.alerts`) and the Prometheus rules
it derives from them and the platform facts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, Field

from trainer_infra.core.model import StrictModel
from trainer_infra.observability.facts import PlatformFacts

_DURATION = re.compile(r"^(?:[0-9]+(?:ms|s|m|h|d|w|y))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
RUNBOOK = "docs/observability.md#{anchor}"


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


S = TypeVar("S", bound=AlertBase)


@dataclass(frozen=True)
class Alert(Generic[S]):
    """One alert (or one per team, pool, controller): `observability.alerts.<name>` is `settings_model`, and
    `rules` turns those settings and the facts into Prometheus alerting rules of group
    `trainer-platform.<group>` (called only when enabled). Each alert name needs a `### <AlertName>` runbook
    section in docs/observability.md (the observability unit tests check it)."""

    name: str
    group: str
    settings_model: type[S]
    rules: Callable[[PlatformFacts, S], list[dict[str, Any]]]

    def settings(self, alerts: BaseModel) -> S:
        """This alert's block of the `alerts` model the registry derives."""
        value = getattr(alerts, self.name)
        if not isinstance(value, self.settings_model):
            raise TypeError(f"alerts.{self.name} is {type(value).__name__}, not {self.settings_model.__name__}")
        return value

    def render(self, facts: PlatformFacts, alerts: BaseModel) -> list[dict[str, Any]]:
        settings = self.settings(alerts)
        return self.rules(facts, settings) if settings.enabled else []


def alert(
    name: str, expr: str, severity: str, summary: str, description: str, for_: str | None, **labels: str
) -> dict[str, Any]:
    """One alerting rule, with the platform's labels (then `labels`: which team, which controller) and its
    runbook section."""
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, "platform": "trainer-platform", **labels}
    rule["annotations"] = {
        "summary": summary,
        "description": description,
        "runbook": RUNBOOK.format(anchor=name.lower()),
    }
    return rule
