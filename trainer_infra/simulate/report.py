"""A replay's report: summary.json, jobs.csv, usage.csv and PNG plots (docs/simulate.md).

Plots need matplotlib (the `simulate` extra); without it the report says so and writes the rest.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trainer_infra.simulate import metrics
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.run import Run

#: Width of a fairness window and of a usage-series step, in trace seconds.
WINDOW = 60.0
#: Queue depth at which admission throughput is measured (kueue#14477 reports it at ~500).
DEPTH = 1000


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
    done = metrics.fleet_work(replayed, run.until)
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
        "cpu_seconds": {k: round(v, 1) for k, v in sorted(run.cpu_seconds.items(), key=lambda kv: -kv[1])},
        "kueue_changes": run.kueue_changes,
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_mean": _round(sum(run.load_average) / len(run.load_average), 1) if run.load_average else None,
            "load_average_max": _round(max(run.load_average, default=math.nan), 1),
        },
        "submit_lag_max": round(run.submit_lag, 1),
        "trace_seconds": round(run.until, 1),
        "makespan": _round(metrics.makespan(replayed, run.until), 1),
        "utilisation": _round(metrics.utilisation(replayed, run.capacity, run.until)),
        "goodput": _round(metrics.goodput(replayed, run.capacity, run.until)),
        "goodput_from_scratch": _round(metrics.goodput(replayed, run.capacity, run.until, from_scratch=True)),
        "held_utilisation": _round(metrics.held_utilisation(replayed, run.capacity, run.until)),
        "admitted_accelerator_seconds": _round(metrics.accelerator_seconds(replayed, run.until), 1),
        "accelerator_seconds": {
            "available": _round(metrics.available(replayed, run.capacity, run.until), 1),
            "held": _round(done.held, 1),
            "ran": _round(done.ran, 1),
            "lag": _round(done.lag, 1),
            "lost": _round(done.lost, 1),
            "lost_from_scratch": _round(done.lost_from_scratch, 1),
        },
        "lag_per_admission": lag_per_admission(metrics.lags(replayed, run.until), run.compression),
        "checkpoints": {
            "default_seconds": run.checkpoint,
            "jobs_that_checkpoint": sum(1 for j in replayed if j.checkpoint > 0),
            "resume_failures": len(run.resume_failures),
            "resumed_admissions": sum(1 for j in replayed for a in j.admissions if a.resumed_from > 0),
        },
        "weighted_fairness": _round(metrics.weighted_fairness(replayed, run.weights, WINDOW, run.until)),
        "weighted_shares": {
            t: _round(v) for t, v in metrics.weighted_shares(replayed, run.weights, WINDOW, run.until).items()
        },
        "weights": dict(sorted(run.weights.items())),
        "within_quota": within_quota(run, replayed),
        "team_shares": {t: _round(v) for t, v in metrics.team_shares(replayed, run.until).items()},
        "waits": _waits(metrics.waits_by_team(jobs)),
        "preemptions": pre.count,
        "preempted_accelerator_seconds": round(pre.lost_accelerator_seconds, 1),
        "preempted_accelerator_seconds_from_scratch": round(pre.lost_from_scratch, 1),
        "preemptions_by_reason": {
            r: {
                "count": lost.count,
                "accelerator_seconds": round(lost.from_checkpoint, 1),
                "accelerator_seconds_from_scratch": round(lost.from_scratch, 1),
            }
            for r, lost in pre.by_reason.items()
        },
        "other_evictions": pre.other_evictions,
        "admissions_per_second_at_depth": None
        if rate is None
        else {"depth": DEPTH, "per_wall_second": round(rate[0] * run.compression, 3), "wall_seconds": rate[1]},
        "cluster_queue_over_limit": over,
        "cluster_queue_samples": len(run.samples),
        **conservation(replayed, run.compression),
    }


def lag_per_admission(lags: Sequence[float], compression: float) -> dict[str, Any]:
    """The controllers' lag per admission (quota held without work running), in wall seconds and in the trace
    minutes it cost at this compression: the replay's artefact, apart from what the jobs did."""
    wall = [lag / compression for lag in lags]
    return {
        "admissions": len(lags),
        "wall_seconds": {
            "mean": _round(sum(wall) / len(wall)) if wall else None,
            "p95": _round(metrics.percentile(wall, 95)),
            "max": _round(max(wall, default=math.nan)),
        },
        "trace_minutes": {
            "mean": _round(sum(lags) / len(lags) / 60, 1) if lags else None,
            "p95": _round(metrics.percentile(lags, 95) / 60, 1),
        },
    }


def _waits(stats: Mapping[str, metrics.WaitStats]) -> dict[str, dict[str, Any]]:
    return {t: {k: _round(v, 1) for k, v in asdict(s).items()} for t, s in stats.items()}


def within_quota(run: Run, replayed: Sequence[JobOutcome]) -> dict[str, Any]:
    """Fairness and waits counting only jobs no larger than their team's nominal quota as demand: what static
    partitions can admit at all, so the three configurations compare on the same jobs (docs/simulate.md)."""
    fits = metrics.within_quota(run.quotas)
    shares = metrics.weighted_shares(replayed, run.weights, WINDOW, run.until, fits)
    waits = metrics.waits_by_team([j for j in replayed if fits(j)])
    return {
        "quotas": dict(sorted(run.quotas.items())),
        "weighted_fairness": _round(metrics.jain(list(shares.values()))),
        "weighted_shares": {t: _round(v) for t, v in shares.items()},
        "waits": _waits(waits),
    }


def conservation(jobs: Sequence[JobOutcome], compression: float) -> dict[str, Any]:
    """What the trace asked for against what the finished jobs' pods ran and what their last admission held.

    `ran` is the conservation: each pod of the last admission from Running to Succeeded, so it matches what that
    admission was given (`given`: the trace's duration, less the progress a resumed job kept from its last
    checkpoint) up to the latency of kwok and the watch (`pod_overrun_wall_seconds`), whatever the machine's
    load. `held` adds the controllers' latency between admission and the Workload's end (`overhead_wall_seconds`)."""
    finished = [j for j in jobs if j.finished is not None and j.admissions]
    held = [j.admissions[-1].length(j.finished or 0.0) for j in finished]
    given = [j.duration - j.admissions[-1].resumed_from for j in finished]
    overhead = [(h - g) / compression for h, g in zip(held, given, strict=True)]
    overrun = [
        (end - start - g) / compression for j, g in zip(finished, given, strict=True) for start, end, _ in j.last_runs
    ]
    return {
        "trace_accelerator_seconds": round(sum(j.accelerators * j.duration for j in jobs), 1),
        "given_accelerator_seconds": round(sum(j.accelerators * g for j, g in zip(finished, given, strict=True)), 1),
        "ran_accelerator_seconds": round(sum(j.ran for j in finished), 1),
        "finished_accelerator_seconds": round(sum(j.accelerators * h for h, j in zip(held, finished, strict=True)), 1),
        "pod_overrun_wall_seconds": _spread(overrun),
        "overhead_wall_seconds": _spread(overhead),
    }


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "mean": _round(sum(values) / len(values)) if values else None,
        "min": _round(min(values, default=math.nan)),
        "max": _round(max(values, default=math.nan)),
    }


def over_limit(run: Run) -> list[str]:
    """Samples where a ClusterQueue held more than nominal + borrowing limit (what Kueue must never allow)."""
    out = []
    for t, cq, held in run.samples:
        ceiling = run.limits[cq][1] if cq in run.limits else None
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
    "pods_ran",
    "ran",
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
                    j.pods_ran,
                    _cell(j.ran),
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


def _figure(s: Mapping[str, Any], *path: str) -> float | None:
    value: Any = s
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return None if value is None else float(value)


#: The bench table's columns: (heading, path into summary.json, format).
TABLE_COLUMNS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("util", ("utilisation",), "{:.3f}"),
    ("goodput", ("goodput",), "{:.3f}"),
    ("goodput scratch", ("goodput_from_scratch",), "{:.3f}"),
    ("fairness", ("weighted_fairness",), "{:.3f}"),
    ("preempt", ("preemptions",), "{:.0f}"),
    ("lost acc-h", ("preempted_accelerator_seconds",), "{:.0f}"),
    ("lost acc-h scratch", ("preempted_accelerator_seconds_from_scratch",), "{:.0f}"),
    ("lag wall s mean", ("lag_per_admission", "wall_seconds", "mean"), "{:.1f}"),
    ("lag wall s p95", ("lag_per_admission", "wall_seconds", "p95"), "{:.1f}"),
)


def table(rows: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A fixed-width comparison of runs (`make bench-scheduling`). Runs of the same label are repeats of one
    configuration: each cell gives every run's figure, `a / b`, so the run-to-run spread is read beside it."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for label, s in rows:
        groups.setdefault(label, []).append(s)
    teams = sorted({t for _, s in rows for t in s["waits"]})
    hours = {"lost acc-h", "lost acc-h scratch"}
    head = ["config", "runs", *(h for h, _, _ in TABLE_COLUMNS), *(f"p95 wait {t} (min)" for t in teams)]
    lines = [head]
    for label, runs in groups.items():
        cells = [label, str(len(runs))]
        for heading, path, fmt in TABLE_COLUMNS:
            scale = 3600.0 if heading in hours else 1.0
            values = [_figure(s, *path) for s in runs]
            cells.append(" / ".join("-" if v is None else fmt.format(v / scale) for v in values))
        for team in teams:
            values = [_figure(s, "waits", team, "p95") for s in runs]
            cells.append(" / ".join("-" if v is None else f"{v / 60:.0f}" for v in values))
        lines.append(cells)
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines)
