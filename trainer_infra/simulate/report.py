"""A replay's report: summary.json, jobs.csv, usage.csv and PNG plots (docs/simulate.md).

Plots need matplotlib (the `simulate` extra); without it the report says so and writes the rest.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer_infra.simulate import metrics
from trainer_infra.simulate.metrics import JobOutcome

#: Width of a fairness window and of a usage-series step, in trace seconds.
WINDOW = 60.0
#: Queue depth at which admission throughput is measured (kueue#14477 reports it at ~500).
DEPTH = 1000


@dataclass
class Run:
    """Everything a replay measured, in trace seconds (wall seconds × compression)."""

    jobs: list[JobOutcome]
    capacity: int
    weights: Mapping[str, float]
    compression: float
    #: trace time at which the replay stopped
    until: float
    wall_seconds: float
    #: why the replay stopped before every job finished ("" when it did not)
    stopped_early: str = ""
    #: ClusterQueue → (nominal, nominal + borrowing limit or None) of the accelerator resource
    limits: Mapping[str, tuple[int, int | None]] = field(default_factory=dict)
    #: (trace time, ClusterQueue, accelerators reserved) read from ClusterQueue status while replaying
    samples: list[tuple[float, str, int]] = field(default_factory=list)
    #: where the wall time went (phase → seconds)
    phases: Mapping[str, float] = field(default_factory=dict)
    label: str = ""


def _round(value: float | None, digits: int = 3) -> float | None:
    if value is None or math.isnan(value):
        return None
    return round(value, digits)


def summary(run: Run) -> dict[str, Any]:
    """The numbers of a run (what summary.json holds)."""
    jobs = run.jobs
    replayed = [j for j in jobs if not j.never_admissible]
    statuses: dict[str, int] = {}
    for job in jobs:
        statuses[job.status] = statuses.get(job.status, 0) + 1
    rate = metrics.admission_rate_at_depth(replayed, DEPTH, run.until)
    pre = metrics.preemptions(replayed)
    over = over_limit(run)
    return {
        "label": run.label,
        "complete": not run.stopped_early,
        "stopped_early": run.stopped_early or None,
        "jobs": len(jobs),
        "status": dict(sorted(statuses.items())),
        "never_admissible": [{"job": j.name, "why": j.never_admissible} for j in jobs if j.never_admissible],
        "capacity": run.capacity,
        "compression": run.compression,
        "wall_seconds": round(run.wall_seconds, 1),
        "wall_phases": {k: round(v, 1) for k, v in run.phases.items()},
        "trace_seconds": round(run.until, 1),
        "makespan": _round(metrics.makespan(replayed, run.until), 1),
        "utilisation": _round(metrics.utilisation(replayed, run.capacity, run.until)),
        "admitted_accelerator_seconds": _round(metrics.accelerator_seconds(replayed, run.until), 1),
        "weighted_fairness": _round(metrics.weighted_fairness(replayed, run.weights, WINDOW, run.until)),
        "weighted_shares": {
            t: _round(v) for t, v in metrics.weighted_shares(replayed, run.weights, WINDOW, run.until).items()
        },
        "weights": dict(sorted(run.weights.items())),
        "waits": {t: {k: _round(v, 1) for k, v in asdict(s).items()} for t, s in metrics.waits_by_team(jobs).items()},
        "preemptions": pre.count,
        "preempted_accelerator_seconds": round(pre.lost_accelerator_seconds, 1),
        "other_evictions": pre.other_evictions,
        "admissions_per_second_at_depth": None
        if rate is None
        else {"depth": DEPTH, "per_wall_second": round(rate[0] * run.compression, 3), "wall_seconds": rate[1]},
        "cluster_queue_over_limit": over,
    }


def over_limit(run: Run) -> list[str]:
    """Samples where a ClusterQueue held more than nominal + borrowing limit (what Kueue must never allow)."""
    out = []
    for t, cq, held in run.samples:
        _, ceiling = run.limits.get(cq, (0, None))
        if ceiling is not None and held > ceiling:
            out.append(f"{cq} held {held} > {ceiling} at t={t:.0f}s")
    return out[:20]


JOB_COLUMNS = (
    "job",
    "team",
    "cluster_queue",
    "accelerators",
    "duration",
    "submit",
    "created",
    "admitted",
    "started",
    "finished",
    "evictions",
    "preemptions",
    "flavor",
    "status",
    "never_admissible",
)


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def write(run: Run, out: Path, plots: bool = True) -> list[str]:
    """Write the report into `out`; returns notes for the user (e.g. plots skipped)."""
    out.mkdir(parents=True, exist_ok=True)
    data = summary(run)
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n")
    with (out / "jobs.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(JOB_COLUMNS)
        for j in run.jobs:
            evicted = [a for a in j.admissions if a.ended_by == "evicted"]
            writer.writerow(
                [
                    j.name,
                    j.team,
                    j.cluster_queue,
                    j.accelerators,
                    _cell(j.duration),
                    _cell(j.submit),
                    _cell(j.created),
                    _cell(j.first_admitted),
                    _cell(j.started),
                    _cell(j.finished),
                    len(evicted),
                    sum(1 for a in evicted if a.preempted),
                    j.flavor,
                    j.status,
                    j.never_admissible,
                ]
            )
    series = metrics.usage_series([j for j in run.jobs if j.admissions], WINDOW, run.until)
    with (out / "usage.csv").open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["minute", *series])
        for k in range(max((len(v) for v in series.values()), default=0)):
            writer.writerow([k, *(f"{v[k]:.2f}" for v in series.values())])
    if not plots:
        return []
    try:
        from trainer_infra.simulate import plots as plotting
    except ImportError:
        return ["plots skipped: matplotlib is not installed (pip install 'trainer-platform[simulate]')"]
    plotting.write_plots(run, series, out)
    return []


def table(rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """A fixed-width comparison of runs (`make bench-scheduling`)."""
    teams = sorted({t for _, s in rows for t in s["waits"]})
    head = ["config", "util", "fairness", "preempt", "lost acc-h", *(f"p95 wait {t} (min)" for t in teams)]
    lines = [head]
    for label, s in rows:
        waits = [s["waits"].get(t, {}).get("p95") for t in teams]
        lines.append(
            [
                label,
                f"{s['utilisation']:.3f}" if s["utilisation"] is not None else "-",
                f"{s['weighted_fairness']:.3f}" if s["weighted_fairness"] is not None else "-",
                str(s["preemptions"]),
                f"{s['preempted_accelerator_seconds'] / 3600:.0f}",
                *("-" if w is None else f"{w / 60:.0f}" for w in waits),
            ]
        )
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in lines)
