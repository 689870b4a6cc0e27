"""The replay's metrics, as pure functions of what happened to each job (docs/simulate.md defines them).

Every time here is in trace seconds since the trace started (wall seconds × the compression factor), so a
result reads in the units of the trace. Nothing here talks to a cluster: the replay records, this computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainer_infra.simulate import work
from trainer_infra.simulate.work import Admission


@dataclass
class JobOutcome:
    """What happened to one trace job in a replay."""

    name: str
    team: str
    cluster_queue: str
    accelerators: int
    duration: float
    submit: float
    created: float | None = None
    admissions: list[Admission] = field(default_factory=list)
    started: float | None = None
    finished: float | None = None
    flavor: str = ""
    never_admissible: str = ""
    #: each pod that ran to the end: (Running, Succeeded, its accelerators), as the replay saw them
    pod_runs: list[tuple[float, float, int]] = field(default_factory=list)
    #: trace seconds of work between the job's checkpoints (0: it never checkpoints, an eviction loses all)
    checkpoint: float = 0.0

    def stretches(self, until: float) -> list[work.Stretch]:
        """What each admission ran, held and lost (work.py)."""
        return work.stretches(self.admissions, self.duration, self.checkpoint, until)

    @property
    def first_admitted(self) -> float | None:
        return self.admissions[0].start if self.admissions else None

    @property
    def last_runs(self) -> list[tuple[float, float, int]]:
        """The pods of the last admission that ran to the end: what finished the job (earlier admissions' pods
        were preempted, or ended before the admission that counts)."""
        since = self.admissions[-1].start if self.admissions else 0.0
        return [run for run in self.pod_runs if run[0] >= since]

    @property
    def pods_ran(self) -> int:
        return len(self.last_runs)

    @property
    def ran(self) -> float:
        """Accelerator-seconds the pods of the last admission ran."""
        return sum(acc * (end - start) for start, end, acc in self.last_runs)

    @property
    def wait(self) -> float | None:
        """`Admitted` − creation of the first admission."""
        if self.created is None or self.first_admitted is None:
            return None
        return self.first_admitted - self.created

    def pending_spans(self, until: float) -> list[tuple[float, float]]:
        """When the job waited for quota: creation → first admission, and each eviction → next admission."""
        if self.created is None:
            return []
        spans, since = [], self.created
        for adm in self.admissions:
            if adm.start > since:
                spans.append((since, adm.start))
            if adm.end is None or adm.ended_by == "finished":
                return spans
            since = adm.end
        if since < until:
            spans.append((since, until))
        return spans

    @property
    def status(self) -> str:
        if self.never_admissible:
            return "never-admissible"
        if self.finished is not None:
            return "finished"
        if self.admissions and self.admissions[-1].end is None:
            return "running"
        return "pending" if self.created is not None else "not-submitted"


def accelerator_seconds(jobs: Iterable[JobOutcome], until: float) -> float:
    """Σ accelerators × time held, over every admission (also those later evicted): quota held, lag included."""
    return sum(j.accelerators * a.length(until) for j in jobs for a in j.admissions)


@dataclass(frozen=True)
class Work:
    """The fleet's accelerator-seconds by what they did (Σ accelerators × each admission's `work.Stretch`)."""

    #: quota held by admissions (`accelerator_seconds`)
    held: float
    #: what the jobs' pods ran: the trace's durations, and what preempted admissions ran before their eviction
    ran: float
    #: quota held while no work ran: the controllers' lag (held − ran)
    lag: float
    #: work evictions threw away, each job resuming from its last checkpoint
    lost: float
    #: work evictions threw away, counting every interrupted admission's work as lost (restart from scratch)
    lost_from_scratch: float


def fleet_work(jobs: Iterable[JobOutcome], until: float) -> Work:
    held = ran = lag = lost = scratch = 0.0
    for job in jobs:
        for s in job.stretches(until):
            held += job.accelerators * s.held
            ran += job.accelerators * s.work
            lag += job.accelerators * s.lag
            lost += job.accelerators * s.lost
            scratch += job.accelerators * s.lost_from_scratch
    return Work(held, ran, lag, lost, scratch)


def team_shares(jobs: Iterable[JobOutcome], until: float) -> dict[str, float]:
    """Each team's fraction of the admitted accelerator-seconds (what the fleet gave it)."""
    held: dict[str, float] = {}
    for j in jobs:
        held[j.team] = held.get(j.team, 0.0) + sum(j.accelerators * a.length(until) for a in j.admissions)
    total = sum(held.values())
    return {t: (v / total if total else 0.0) for t, v in sorted(held.items())}


def makespan(jobs: Sequence[JobOutcome], until: float) -> float:
    """From the first job's creation to the last one's end (`until` if one still runs or waits)."""
    created = [j.created for j in jobs if j.created is not None]
    if not created:
        return 0.0
    ends = [until if j.finished is None else j.finished for j in jobs if j.created is not None]
    return max(ends) - min(created)


def available(jobs: Sequence[JobOutcome], capacity: int, until: float) -> float:
    """The fleet's accelerator-seconds over the makespan, less those admissions held in the controllers' lag:
    what a configuration had to run work on, neither credited nor charged for the control plane's latency."""
    return max(0.0, capacity * makespan(jobs, until) - fleet_work(jobs, until).lag)


def _share(part: float, jobs: Sequence[JobOutcome], capacity: int, until: float) -> float:
    whole = available(jobs, capacity, until) if capacity > 0 else 0.0
    return part / whole if whole > 0 else 0.0


def utilisation(jobs: Sequence[JobOutcome], capacity: int, until: float) -> float:
    """Accelerator-seconds the jobs ran / `available`: the trace's durations, and what preempted admissions ran."""
    return _share(fleet_work(jobs, until).ran, jobs, capacity, until)


def goodput(jobs: Sequence[JobOutcome], capacity: int, until: float, *, from_scratch: bool = False) -> float:
    """Accelerator-seconds the jobs ran and kept / `available`. Kept: each job resumes from its last checkpoint;
    with `from_scratch`, every interrupted admission's work counts as thrown away."""
    done = fleet_work(jobs, until)
    return _share(done.ran - (done.lost_from_scratch if from_scratch else done.lost), jobs, capacity, until)


def held_utilisation(jobs: Sequence[JobOutcome], capacity: int, until: float) -> float:
    """Admitted accelerator-seconds / (capacity × makespan): quota held, the controllers' lag included."""
    span = makespan(jobs, until)
    if capacity <= 0 or span <= 0:
        return 0.0
    return accelerator_seconds(jobs, until) / (capacity * span)


def lags(jobs: Iterable[JobOutcome], until: float) -> list[float]:
    """Each admission's lag (trace seconds): quota held without the job's work running."""
    return [s.lag for j in jobs for s in j.stretches(until)]


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (the smallest value with at least p% of values at or below it)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class WaitStats:
    """Waits of a team's admitted jobs (trace seconds); `not_admitted` jobs are counted apart."""

    admitted: int
    not_admitted: int
    p50: float
    p95: float
    max: float


def waits_by_team(jobs: Iterable[JobOutcome]) -> dict[str, WaitStats]:
    by_team: dict[str, list[JobOutcome]] = {}
    for job in jobs:
        if not job.never_admissible:
            by_team.setdefault(job.team, []).append(job)
    out = {}
    for team, team_jobs in sorted(by_team.items()):
        waits = [w for w in (j.wait for j in team_jobs) if w is not None]
        out[team] = WaitStats(
            len(waits),
            len(team_jobs) - len(waits),
            percentile(waits, 50),
            percentile(waits, 95),
            max(waits) if waits else math.nan,
        )
    return out


def jain(values: Sequence[float]) -> float:
    """Jain's index: (Σx)² / (n Σx²); 1 when all equal, 1/n when one gets everything."""
    if not values:
        return 1.0
    square = sum(v * v for v in values)
    return 1.0 if square == 0 else sum(values) ** 2 / (len(values) * square)


def weighted_shares(
    jobs: Sequence[JobOutcome],
    weights: Mapping[str, float],
    window: float,
    until: float,
    backlog: Callable[[JobOutcome], bool] | None = None,
) -> dict[str, float]:
    """Per team: accelerator-seconds received in the windows where it had pending work, divided by its weight
    and by the length of those windows (a rate per unit of weight). Teams never pending are left out.
    `backlog`: which pending jobs make a window count (default: all)."""
    if window <= 0:
        raise ValueError("window must be positive")
    start = min((j.created for j in jobs if j.created is not None), default=0.0)
    count = max(1, math.ceil((until - start) / window))
    backlogged: dict[str, set[int]] = {}  # team → windows with pending work
    for job in jobs if backlog is None else filter(backlog, jobs):
        for a, b in job.pending_spans(until):
            first, last = int((a - start) // window), math.ceil((b - start) / window)
            backlogged.setdefault(job.team, set()).update(range(max(0, first), min(count, last)))
    received: dict[str, float] = {}
    for job in jobs:
        mine = backlogged.get(job.team, set())
        for adm in job.admissions:
            end = until if adm.end is None else adm.end
            for k in range(int((adm.start - start) // window), math.ceil((end - start) / window)):
                if k in mine:
                    got = job.accelerators * adm.overlap(start + k * window, start + (k + 1) * window, until)
                    received[job.team] = received.get(job.team, 0.0) + got
    windows = {team: len(ks) for team, ks in backlogged.items() if ks}
    return {t: received.get(t, 0.0) / (weights.get(t, 1.0) * windows[t] * window) for t in sorted(windows)}


def weighted_fairness(
    jobs: Sequence[JobOutcome],
    weights: Mapping[str, float],
    window: float,
    until: float,
    backlog: Callable[[JobOutcome], bool] | None = None,
) -> float:
    """Jain's index over `weighted_shares` (1.0: every backlogged team got capacity in proportion to its weight)."""
    return jain(list(weighted_shares(jobs, weights, window, until, backlog).values()))


def within_quota(quotas: Mapping[str, int]) -> Callable[[JobOutcome], bool]:
    """Jobs no larger than their team's nominal quota (`quotas`: team → accelerators; a team not named: any).

    A team whose only pending job is larger than its quota waits for others' idle capacity, and receives
    little meanwhile: the plain metrics count that as unfair, static partitions never admit such a job."""
    return lambda job: job.accelerators <= quotas.get(job.team, job.accelerators)


@dataclass(frozen=True)
class Lost:
    """Evictions and the accelerator-seconds of work they threw away."""

    count: int
    #: each job resuming from its last checkpoint
    from_checkpoint: float
    #: each interrupted admission's work lost (a restart from scratch)
    from_scratch: float


@dataclass(frozen=True)
class Preemptions:
    count: int
    #: work preemptions threw away, each job resuming from its last checkpoint (accelerator-seconds)
    lost_accelerator_seconds: float
    #: work preemptions threw away if every preempted job restarted from scratch
    lost_from_scratch: float
    #: evictions for other reasons (e.g. PodsReadyTimeout)
    other_evictions: int
    #: per Kueue reason (`InCohortReclamation`, `InCohortFairSharing`, `InClusterQueue`): which of Kueue's
    #: rules threw the work away
    by_reason: dict[str, Lost]


def preemption_reason(reason: str) -> str:
    """The most specific part of an eviction's reason (`Preempted/InCohortReclamation` → `InCohortReclamation`)."""
    return reason.rsplit("/", 1)[-1]


def preemptions(jobs: Iterable[JobOutcome]) -> Preemptions:
    count, lost, scratch, other = 0, 0.0, 0.0, 0
    by_reason: dict[str, Lost] = {}
    for job in jobs:
        # an open admission is never preempted: the end of the run does not matter here
        for adm, done in zip(job.admissions, job.stretches(until=0.0), strict=True):
            if adm.preempted:
                count += 1
                thrown, all_of_it = job.accelerators * done.lost, job.accelerators * done.lost_from_scratch
                lost += thrown
                scratch += all_of_it
                reason = preemption_reason(adm.reason)
                was = by_reason.get(reason, Lost(0, 0.0, 0.0))
                by_reason[reason] = Lost(was.count + 1, was.from_checkpoint + thrown, was.from_scratch + all_of_it)
            elif adm.ended_by == "evicted":
                other += 1
    return Preemptions(count, lost, scratch, other, dict(sorted(by_reason.items())))


def admission_rate_at_depth(jobs: Sequence[JobOutcome], depth: int, until: float) -> tuple[float, float] | None:
    """(admissions per trace second, trace seconds spent) while at least `depth` jobs waited for quota;
    None if the queue never got that deep."""
    events: list[tuple[float, int, int]] = []  # (time, order, change in pending)
    admissions: list[float] = []
    for job in jobs:
        for lo, hi in job.pending_spans(until):
            events.append((lo, 1, +1))
            events.append((hi, 0, -1))
        admissions.extend(a.start for a in job.admissions)
    events.sort()
    pending, since, spent, inside = 0, 0.0, 0.0, []
    for t, _, change in events:
        if pending >= depth:
            spent += t - since
            inside.append((since, t))
        pending += change
        since = t
    if spent <= 0:
        return None
    admitted = sum(1 for a in admissions for lo, hi in inside if lo < a <= hi)
    return admitted / spent, spent


def usage_series(jobs: Iterable[JobOutcome], step: float, until: float) -> dict[str, list[float]]:
    """ClusterQueue → mean accelerators held in each `step` of trace time from 0 to `until`."""
    count = max(1, math.ceil(until / step))
    series: dict[str, list[float]] = {}
    for job in jobs:
        row = series.setdefault(job.cluster_queue, [0.0] * count)
        for adm in job.admissions:
            end = until if adm.end is None else adm.end
            for k in range(int(adm.start // step), min(count, math.ceil(end / step))):
                row[k] += job.accelerators * adm.overlap(k * step, (k + 1) * step, until) / step
    return dict(sorted(series.items()))
