"""What a job ran, held and lost, on timelines small enough to work out by hand (the numbers in the comments):
utilisation and goodput count the jobs' work, not the controllers' lag, and an eviction loses only the work
since the job's last checkpoint."""

from __future__ import annotations

import pytest

from trainer_infra.simulate import metrics
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.report import lag_per_admission
from trainer_infra.simulate.work import Admission, checkpoint_before, resume_point, stretches

PREEMPTED = "Preempted/InClusterQueue"


def outcome(acc: int, duration: float, checkpoint: float, *admissions: Admission) -> JobOutcome:
    last = admissions[-1] if admissions else None
    finished = last.end if last is not None and last.ended_by == "finished" else None
    return JobOutcome("j", "a", "cq-a", acc, duration, 0, 0, list(admissions), finished=finished, checkpoint=checkpoint)


def test_a_job_preempted_at_70_percent_with_25_percent_checkpoints_loses_the_20_percent_since_the_last() -> None:
    # 100 s of work, a checkpoint every 25 s. Admitted at 0, pods running at 2, preempted at 72: it ran 70 s,
    # its last checkpoint is at 50, so it loses 20 and resumes from 50. Admitted again at 80, pods running at 83,
    # they run the 50 s left, the Workload finishes at 135: that admission held 55 s for 50 s of work (lag 5).
    first = Admission(0, 72, "evicted", PREEMPTED, running=2)
    assert resume_point([first], 100, 25, 72) == 50
    second = Admission(80, 135, "finished", running=83, resumed_from=50)
    one, two = stretches([first, second], 100, 25, 135)
    assert (one.held, one.work, one.lag, one.lost, one.lost_from_scratch) == (72, 70, 2, 20, 70)
    assert (two.held, two.work, two.lag, two.lost, two.lost_from_scratch) == (55, 50, 5, 0, 0)
    # ran 120 s of work, kept the job's 100: exactly what it lost is what it ran beyond its duration
    assert one.work + two.work - one.lost - two.lost == 100


def test_a_job_that_never_checkpoints_loses_all_an_interrupted_admission_ran() -> None:
    # the same timeline without checkpoints: it resumes from 0 and runs its 100 s again
    first = Admission(0, 72, "evicted", PREEMPTED, running=2)
    assert resume_point([first], 100, 0, 72) == 0
    one, two = stretches([first, Admission(80, 185, "finished", running=83)], 100, 0, 185)
    assert (one.lost, one.lost_from_scratch, two.work, two.lag) == (70, 70, 100, 5)
    # a checkpoint interval longer than the job is the same: no checkpoint before the preemption
    assert resume_point([first], 100, 150, 72) == 0


def test_two_preemptions_between_the_same_checkpoints_lose_twice() -> None:
    # 100 s, a checkpoint every 30 s: runs 40 (checkpoint 30, loses 10), resumes at 30 and runs 25 (reaches 55,
    # no new checkpoint: loses 25), resumes at 30 again and runs the 70 left
    a = Admission(0, 40, "evicted", PREEMPTED, running=0)
    b = Admission(50, 75, "evicted", PREEMPTED, running=50, resumed_from=30)
    assert resume_point([a], 100, 30, 40) == 30
    assert resume_point([a, b], 100, 30, 75) == 30
    c = Admission(80, 150, "finished", running=80, resumed_from=30)
    done = stretches([a, b, c], 100, 30, 150)
    assert [s.work for s in done] == [40, 25, 70]
    assert [s.lost for s in done] == [10, 25, 0]
    assert [s.lost_from_scratch for s in done] == [40, 25, 0]


def test_a_resume_that_came_too_late_counts_the_rerun_as_lost() -> None:
    # preempted at 70 with its checkpoint at 50, but admitted again before the replay shortened its pods: they ran
    # the whole 100 s again, of which the 50 before the checkpoint were done already
    first = Admission(0, 70, "evicted", PREEMPTED, running=0)
    one, two = stretches([first, Admission(70, 170, "finished", running=70, resumed_from=0)], 100, 25, 170)
    assert (one.lost, two.work, two.lost) == (20, 100, 50)


def test_an_admission_evicted_before_its_pods_ran_did_no_work_and_was_all_lag() -> None:
    (only,) = stretches([Admission(0, 4, "evicted", PREEMPTED)], 100, 25, 10)
    assert (only.held, only.work, only.lag, only.lost) == (4, 0, 4, 0)


def test_work_is_capped_by_what_was_left_and_checkpoints_land_on_their_progress() -> None:
    # pods that overran their duration (a late watch) ran no more than the job had left
    (only,) = stretches([Admission(0, 30, "evicted", PREEMPTED, running=0, resumed_from=90)], 100, 25, 30)
    assert only.work == 10
    assert checkpoint_before(0.7, 0.1) == pytest.approx(0.7)  # 0.7 / 0.1 = 6.999… in floating point
    assert checkpoint_before(0.69, 0.1) == pytest.approx(0.6)
    assert checkpoint_before(70, 0) == 0


def test_utilisation_and_goodput_count_the_jobs_work_and_leave_the_lag_out() -> None:
    # capacity 8. X (4 acc, 10 s): admitted 0, pods running 2, finished 14: held 14, ran 10, lag 4.
    # Y (4 acc, 6 s): admitted 0, pods running 1, finished 8: held 8, ran 6, lag 2. Makespan 0-14.
    x = outcome(4, 10, 0, Admission(0, 14, "finished", running=2))
    y = outcome(4, 6, 0, Admission(0, 8, "finished", running=1))
    jobs = [x, y]
    # held 4 × 14 + 4 × 8 = 88 of 8 × 14 = 112: what utilisation was (0.786), lag included
    assert metrics.held_utilisation(jobs, 8, 14) == pytest.approx(88 / 112)
    # ran 4 × 10 + 4 × 6 = 64; lag 4 × 4 + 4 × 2 = 24 accelerator-seconds neither used nor idle: 64 / (112 - 24)
    done = metrics.fleet_work(jobs, 14)
    assert (done.held, done.ran, done.lag) == (88, 64, 24)
    assert metrics.available(jobs, 8, 14) == 88
    assert metrics.utilisation(jobs, 8, 14) == pytest.approx(64 / 88)
    assert metrics.goodput(jobs, 8, 14) == pytest.approx(64 / 88)  # nothing evicted
    assert sorted(metrics.lags(jobs, 14)) == [2, 4]


def test_goodput_both_ways_on_one_timeline() -> None:
    # capacity 1: the 100 s job with 25 s checkpoints, preempted at 70 and resumed at once from 50 (no lag):
    # the fleet ran 120 s of work in 120 s; from its checkpoint it lost 20, restarting from scratch it would count
    # the 70 as lost
    job = outcome(
        1,
        100,
        25,
        Admission(0, 70, "evicted", PREEMPTED, running=0),
        Admission(70, 120, "finished", running=70, resumed_from=50),
    )
    assert metrics.utilisation([job], 1, 120) == pytest.approx(1.0)
    assert metrics.goodput([job], 1, 120) == pytest.approx(100 / 120)
    assert metrics.goodput([job], 1, 120, from_scratch=True) == pytest.approx(50 / 120)
    pre = metrics.preemptions([job])
    assert (pre.count, pre.lost_accelerator_seconds, pre.lost_from_scratch) == (1, 20, 70)
    assert pre.by_reason == {"InClusterQueue": metrics.Lost(1, 20, 70)}


def test_the_lag_per_admission_is_reported_in_wall_seconds_and_trace_minutes() -> None:
    # lags of 120, 240 and 1,200 trace seconds at 60×: 2, 4 and 20 wall seconds; mean 520 s = 8.7 trace minutes
    lag = lag_per_admission([120, 240, 1200], 60)
    assert lag["admissions"] == 3
    assert lag["wall_seconds"] == {"mean": 8.667, "p95": 20.0, "max": 20.0}
    assert lag["trace_minutes"] == {"mean": 8.7, "p95": 20.0}
