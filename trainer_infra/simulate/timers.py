"""Kueue's wall-clock timers under time compression: what the simulation's Kueue runs with instead of the
stack's values, and why that does not change the decisions a replay measures.

A replay runs `compression` trace seconds per wall second, but Kueue's timers count wall seconds. Two of the
stack's settings (Kueue 0.19 `waitForPodsReady`) then mean something else than on the cluster:

- `timeout` (and `recoveryTimeout`): on the cluster it bounds image pulls and stuck pods. In a replay the pods
  are kwok's and get ready as soon as the controllers reach them, so the only thing that can run into the
  timeout is the control plane's own latency, which grows with load; an eviction then (`PodsReadyTimeout`)
  is an artefact of the machine, and after `backoffLimitCount` of them Kueue deactivates the job for good: it
  never finishes (what kept the first 2,000-job bench from completing at 900×). The simulation raises the
  timeout to at least `TIMEOUT_FLOOR` wall seconds, far above any latency of a healthy replay, so it does not
  fire; it stays on, so the admission path (`blockAdmission`, the PodsReady condition) is the stack's.
- `requeuingStrategy.backoffBaseSeconds` / `backoffMaxSeconds`: the delay before an evicted job is queued
  again. It only follows a PodsReady eviction (Kueue 0.19 `pkg/workload/workload.go` UpdateRequeueState,
  called from the PodsReady timeout path only; preempted jobs requeue at once). Divided by the compression,
  so that if it ever applies it lasts the trace time it lasts on the cluster (Kueue counts whole seconds:
  1 s at least).

Not configurable, and therefore a floor on what a replay can resolve: Kueue requeues inadmissible workloads in
batches of 1 s (`pkg/cache/queue/inadmissible_workloads.go`), and TAS ungates and LocalQueue status in
batches of 1 s (`constants.UpdatesBatchPeriod`). With JobSet, Trainer and kwok in between, each admission
costs a few wall seconds before the pods run and after they end: `compression ×` that is trace time a job
holds quota without running (the report's `overhead_wall_seconds`). Pick the compression so that it stays
small against the trace's job durations.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

Obj = dict[str, Any]
#: The least PodsReady timeout (wall seconds) a replay runs with.
TIMEOUT_FLOOR = 600.0
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")


def seconds(duration: str) -> float:
    """Seconds of a Go duration string as Kueue's config takes it (`1h30m`, `45s`, `500ms`)."""
    parts = _PART.findall(duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a duration: {duration!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _go(value: float) -> str:
    return f"{value:g}s"


def compressed_settings(settings: Obj, compression: float) -> tuple[Obj, list[str]]:
    """The stack's Kueue settings as the simulation runs them, and one line per change (for the report)."""
    out = copy.deepcopy(settings)
    changes: list[str] = []
    wait = out.get("waitForPodsReady")
    if not isinstance(wait, dict) or wait.get("enable") is False:
        return out, changes
    for key in ("timeout", "recoveryTimeout"):
        if key in wait and seconds(str(wait[key])) < TIMEOUT_FLOOR:
            changes.append(
                f"waitForPodsReady.{key}: {wait[key]} → {_go(TIMEOUT_FLOOR)} wall (kwok pods do not get stuck; "
                "only the control plane's own latency could reach it)"
            )
            wait[key] = _go(TIMEOUT_FLOOR)
    requeuing = wait.get("requeuingStrategy")
    if isinstance(requeuing, dict):
        for key in ("backoffBaseSeconds", "backoffMaxSeconds"):
            if key in requeuing:
                scaled = max(1, math.ceil(int(requeuing[key]) / compression))
                if scaled != requeuing[key]:
                    changes.append(
                        f"waitForPodsReady.requeuingStrategy.{key}: {requeuing[key]} → {scaled} "
                        f"(÷ {compression:g}: the same trace time)"
                    )
                    requeuing[key] = scaled
    return out, changes
