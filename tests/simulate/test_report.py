"""The report a replay writes: the numbers of summary.json, one CSV row per job, the usage series, the plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.simulate.test_metrics import JOBS
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.report import conservation, summary, table, write
from trainer_infra.simulate.run import Run
from trainer_infra.simulate.work import Admission


def run(**changes: object) -> Run:
    never = JobOutcome("huge", "a", "cq-a", 512, 10, 0, never_admissible="more than any pool")
    base = Run([*JOBS, never], capacity=8, weights={"a": 1, "b": 2}, compression=60, until=25, wall_seconds=0.5)
    base.limits = {"cq-a": (4, 8), "cq-b": (4, 8)}
    base.samples = [(10.0, "cq-b", 8), (11.0, "cq-a", 12)]
    for key, value in changes.items():
        setattr(base, key, value)
    return base


def test_summary_holds_the_metrics_and_names_what_could_never_run() -> None:
    s = summary(run())
    assert s["utilisation"] == 0.7 and s["makespan"] == 25 and s["goodput"] == 0.7  # nothing preempted
    assert s["team_shares"] == {"a": 0.429, "b": 0.571}  # (40 + 20) / 140, 80 / 140
    assert s["status"] == {"finished": 3, "never-admissible": 1}
    assert s["never_admissible"] == [{"job": "huge", "why": "more than any pool"}]
    assert s["waits"]["a"]["p95"] == 15
    assert s["cluster_queue_over_limit"] == ["cq-a held 12 > 8 at t=11s"]
    assert s["complete"] is True
    assert s["weighted_fairness"] < 1  # one 60 s window: b waited (for B) and received less per weight than a
    inside = summary(run(quotas={"a": 4, "b": 4}))["within_quota"]  # B, twice b's quota, is not b's demand
    assert inside["weighted_fairness"] == 1.0 and set(inside["waits"]) == {"a"}
    stopped = summary(run(stopped_early="the 600 s bound was reached with 2 jobs pending"))
    assert stopped["complete"] is False and "600 s bound" in stopped["stopped_early"]


def test_the_report_files(tmp_path: Path) -> None:
    assert write(run(), tmp_path) == []
    assert json.loads((tmp_path / "summary.json").read_text())["jobs"] == 4
    rows = list(csv.DictReader((tmp_path / "jobs.csv").open()))
    assert [(r["job"], r["admitted"], r["status"]) for r in rows][:2] == [
        ("A", "0.0", "finished"),
        ("B", "10.0", "finished"),
    ]
    usage = list(csv.reader((tmp_path / "usage.csv").open()))
    assert usage[0] == ["minute", "cq-a", "cq-b"] and usage[1:] == [["0", "1.00", "1.33"]]  # (40 + 20) / 60, 80 / 60
    for plot in ("utilisation.png", "shares.png", "waits.png"):
        assert (tmp_path / plot).read_bytes()[:4] == b"\x89PNG"
    assert "util" in table([("derived", summary(run()))]).splitlines()[0]


def test_conservation_counts_the_pods_that_finished_the_job_not_a_preempted_attempt() -> None:
    # 2 pods × 4 acc for 10 s (×60 compression); preempted at 4, admitted again at 6, finished at 18. One pod of the
    # preempted attempt had ended (1-3): it is not the work that finished the job.
    job = JobOutcome("P", "a", "cq-a", 8, 10, 0, 0, [Admission(0, 4, "evicted", "InCohortReclamation")])
    job.admissions.append(Admission(6, 18, "finished"))
    job.finished = 18
    job.pod_runs = [(1, 3, 4), (7, 17.5, 4), (7.5, 17.5, 4)]
    assert (job.pods_ran, job.ran) == (2, 4 * 10.5 + 4 * 10)
    c = conservation([job], compression=60)
    assert c["trace_accelerator_seconds"] == 80 and c["ran_accelerator_seconds"] == 82
    assert c["finished_accelerator_seconds"] == 8 * 12  # the last admission held 6-18
    assert c["pod_overrun_wall_seconds"] == {"mean": 0.004, "min": 0.0, "max": 0.008}  # (0.5 and 0 s) / 60
    assert c["overhead_wall_seconds"]["max"] == 0.033  # (12 - 10) / 60


def test_the_bench_table_gives_every_figure_of_a_configuration_with_its_repeat() -> None:
    first, second = summary(run()), summary(run())
    second["goodput"], second["preemptions"] = 0.65, 3
    older = {k: v for k, v in summary(run()).items() if k not in ("goodput_from_scratch", "lag_per_admission")}
    lines = table([("derived", first), ("flat", older), ("derived", second)]).splitlines()
    head = lines[0].split("  ")
    assert [c.strip() for c in head if c.strip()][:5] == ["config", "runs", "util", "goodput", "goodput scratch"]
    derived, flat = lines[1], lines[2]
    assert derived.startswith("derived") and "0.700 / 0.700" in derived and "0.700 / 0.650" in derived
    assert "0 / 3" in derived
    assert flat.startswith("flat") and " - " in flat  # a figure an older report lacks is shown as missing


def test_the_summary_reports_the_lag_and_both_goodputs() -> None:
    s = summary(run(compression=60.0))
    # JOBS hold exactly their durations from their pods' start: no lag, nothing lost
    assert s["lag_per_admission"]["admissions"] == 3 and s["lag_per_admission"]["wall_seconds"]["max"] == 0
    assert s["goodput"] == s["goodput_from_scratch"] == s["held_utilisation"] == 0.7
    assert s["accelerator_seconds"]["ran"] == s["accelerator_seconds"]["held"] == 140
    assert s["checkpoints"] == {
        "default_seconds": 0.0,
        "jobs_that_checkpoint": 0,
        "resume_failures": 0,
        "resumed_admissions": 0,
    }
