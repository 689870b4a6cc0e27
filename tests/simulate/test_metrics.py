"""The replay's metrics on traces small enough to compute by hand (the numbers in the comments)."""

from __future__ import annotations

import math

import pytest

from trainer_infra.simulate import metrics
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.work import Admission


def job(
    name: str, team: str, acc: int, created: float, *spans: tuple[float, float, str, str], duration: float = 0
) -> JobOutcome:
    """A job whose pods run from each admission's start (no lag); its duration, unless given, is its last
    admission's length."""
    admissions = [Admission(a, b, how, why, running=a) for a, b, how, why in spans]
    finished = admissions[-1].end if admissions and admissions[-1].ended_by == "finished" else None
    if not duration:
        duration = spans[-1][1] - spans[-1][0] if spans else 10
    return JobOutcome(name, team, f"cq-{team}", acc, duration, created, created, admissions, finished=finished)


# capacity 8: A (a, 4 acc) runs 0-10; B (b, 8 acc) waits 0-10, runs 10-20; C (a, 4 acc) waits 5-20, runs 20-25
A = job("A", "a", 4, 0, (0, 10, "finished", ""))
B = job("B", "b", 8, 0, (10, 20, "finished", ""))
C = job("C", "a", 4, 5, (20, 25, "finished", ""))
JOBS = [A, B, C]


def test_utilisation_is_what_the_jobs_ran_over_capacity_times_makespan_without_lag() -> None:
    # no lag here: the jobs ran exactly what they held
    assert metrics.accelerator_seconds(JOBS, 25) == 4 * 10 + 8 * 10 + 4 * 5  # 140
    assert metrics.makespan(JOBS, 25) == 25
    assert metrics.utilisation(JOBS, 8, 25) == pytest.approx(140 / (8 * 25))  # 0.7
    assert metrics.held_utilisation(JOBS, 8, 25) == pytest.approx(0.7)


def test_goodput_leaves_out_what_preemption_threw_away() -> None:
    # D (b, 8 acc, 10 s, never checkpoints) held 0-5, was preempted, ran again 10-20: 40 of its 120
    # accelerator-seconds were thrown away
    d = job("D", "b", 8, 0, (0, 5, "evicted", "Preempted/InCohortReclamation"), (10, 20, "finished", ""))
    assert metrics.utilisation([d], 8, 20) == pytest.approx(120 / 160)
    assert metrics.goodput([d], 8, 20) == pytest.approx(80 / 160)
    assert metrics.goodput([d], 8, 20, from_scratch=True) == pytest.approx(80 / 160)


def test_waits_per_team_are_admitted_minus_created_nearest_rank() -> None:
    waits = metrics.waits_by_team(JOBS)
    assert (waits["a"].p50, waits["a"].p95, waits["a"].max) == (0, 15, 15)
    assert (waits["b"].p50, waits["b"].max, waits["b"].admitted) == (10, 10, 1)


def test_a_job_never_admitted_is_counted_apart_not_as_a_zero_wait() -> None:
    stuck = JobOutcome("D", "b", "cq-b", 8, 10, 3, 3)
    assert metrics.waits_by_team([B, stuck])["b"].not_admitted == 1
    assert stuck.pending_spans(25) == [(3, 25)]


def test_weighted_fairness_counts_only_windows_with_pending_work() -> None:
    # windows of 10: a is backlogged in w0, w1 (C waits 5-20) and receives 40 there (A in w0) → 40 / (1 × 20) = 2;
    # b is backlogged in w0 only (B waits 0-10) and receives nothing in w0 → 0. Jain([2, 0]) = 4 / (2 × 4) = 0.5
    shares = metrics.weighted_shares(JOBS, {"a": 1, "b": 2}, 10, 25)
    assert shares == {"a": 2.0, "b": 0.0}
    assert metrics.weighted_fairness(JOBS, {"a": 1, "b": 2}, 10, 25) == pytest.approx(0.5)


def test_within_quota_counts_only_jobs_a_team_is_entitled_to_as_its_demand() -> None:
    # quotas a 4, b 4: B (8 acc, twice b's quota) waiting 0-10 no longer makes w0 a window b is backlogged in, so
    # b drops out (never backlogged) and a alone is left: Jain([2]) = 1; B's wait drops out of b's waits too
    fits = metrics.within_quota({"a": 4, "b": 4})
    assert [j.name for j in JOBS if fits(j)] == ["A", "C"]
    assert metrics.weighted_shares(JOBS, {"a": 1, "b": 2}, 10, 25, fits) == {"a": 2.0}
    assert metrics.weighted_fairness(JOBS, {"a": 1, "b": 2}, 10, 25, fits) == pytest.approx(1.0)
    # what a team receives still counts every job: with b's quota 2, only B2 is demand (waits 12-15: w1), and b
    # receives B's run (8 × 10) and B2's (2 × 5) in w1
    b_late = job("B2", "b", 2, 12, (15, 20, "finished", ""))
    shares = metrics.weighted_shares([*JOBS, b_late], {"a": 1, "b": 1}, 10, 25, metrics.within_quota({"b": 2}))
    assert shares["b"] == pytest.approx((8 * 10 + 2 * 5) / 10)


def test_weights_divide_what_a_team_receives() -> None:
    # both teams wait in w0 and receive 40 (a) and 80 (b) there; b's weight 2 makes them equal: Jain = 1
    a = job("a1", "a", 4, 0, (5, 10, "finished", ""))
    b = job("b1", "b", 8, 0, (5, 10, "finished", ""))
    a_shares = metrics.weighted_shares([a, b], {"a": 1, "b": 2}, 10, 10)
    assert a_shares == {"a": 2.0, "b": 2.0}
    assert metrics.weighted_fairness([a, b], {"a": 1, "b": 1}, 10, 10) == pytest.approx(9 / 10)  # (2+4)²/(2·20)
    assert metrics.jain([1, 0, 0, 0]) == pytest.approx(0.25)


def test_preemptions_and_the_work_they_threw_away() -> None:
    # D (2 acc) is preempted after 6 s, waits 6-8, runs again 8-18: one preemption, 12 accelerator-seconds lost;
    # F (4 acc) is reclaimed by its cohort after 2 s (8 lost), then again after 1 s (4 lost)
    d = job("D", "a", 2, 0, (0, 6, "evicted", "Preempted/InClusterQueue"), (8, 18, "finished", ""))
    timeout = job("E", "a", 2, 0, (0, 3, "evicted", "PodsReadyTimeout"), (3, 13, "finished", ""))
    reclaim = "Preempted/InCohortReclamation"
    f = job("F", "b", 4, 0, (0, 2, "evicted", reclaim), (3, 4, "evicted", reclaim), (5, 8, "finished", ""))
    result = metrics.preemptions([d, timeout, f])
    assert (result.count, result.lost_accelerator_seconds, result.other_evictions) == (3, 24, 1)
    assert result.lost_from_scratch == 24  # none of them checkpoints: both ways agree
    assert result.by_reason == {
        "InClusterQueue": metrics.Lost(1, 12, 12),
        "InCohortReclamation": metrics.Lost(2, 12, 12),
    }
    assert d.pending_spans(20) == [(6, 8)]
    assert metrics.accelerator_seconds([d], 20) == 2 * 6 + 2 * 10


def test_admission_rate_is_measured_only_while_the_queue_is_deep() -> None:
    # two jobs wait during 5-10 (B and C); B is admitted at 10: one admission in 5 s
    rate = metrics.admission_rate_at_depth(JOBS, 2, 25)
    assert rate is not None and rate[0] == pytest.approx(0.2) and rate[1] == 5
    assert metrics.admission_rate_at_depth(JOBS, 3, 25) is None


def test_usage_series_per_cluster_queue() -> None:
    series = metrics.usage_series(JOBS, 10, 25)
    assert series == {"cq-a": [4.0, 0.0, 2.0], "cq-b": [0.0, 8.0, 0.0]}


def test_a_running_job_counts_until_the_run_stopped() -> None:
    running = job("R", "a", 4, 0, (2, math.inf, "", ""), duration=100)
    running.admissions[0] = Admission(2, running=2)
    assert running.status == "running"
    assert metrics.accelerator_seconds([running], 12) == 40
