"""PromQL building blocks shared by the alerts and the dashboards."""

from __future__ import annotations

import re

TEAM_INFO = "trainer_platform_team_info"


def ksm_label(key: str) -> str:
    """kube-state-metrics' name for a Kubernetes label key (`a.b/c-d` → `label_a_b_c_d`)."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", key)


def regex(values: list[str] | tuple[str, ...]) -> str:
    """An RE2 alternation of Kubernetes names inside a PromQL string (only `.` needs escaping there)."""
    return "|".join(v.replace(".", "\\\\.") for v in sorted(values))


def with_team(expr: str, on: str) -> str:
    """Attach the `team` label by joining the team info series on `on` (cluster_queue or namespace)."""
    return f"({expr})\n* on ({on}) group_left (team) {TEAM_INFO}"
