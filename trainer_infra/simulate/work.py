"""What each admission of a job did: the work its pods ran, the quota it held around that work (the
controllers' lag), and the work an eviction threw away, with and without checkpoints (docs/simulate.md).

Pure functions of a job's recorded timeline (each admission's start, its pods' first `Running`, its end and
why, and the progress it resumed from), its trace duration and its checkpoint interval. The replay uses
`resume_point` to give a re-admitted job's pods only the work left after its last checkpoint, and the metrics
read the same numbers back, so what is counted is what was run.

Every time is in trace seconds. A job's progress is the work it has done, from 0 to its duration; a job that
checkpoints every K seconds of work has checkpoints at K, 2K, ... of progress.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Trace seconds of work between a job's checkpoints when its trace row gives none. Half an hour: a job shorter
#: than that never checkpoints (it restarts from scratch, as before), so the default credits checkpoints only to
#: the long jobs that lose most, and no more often than a large model's checkpoint is usually written (minutes
#: of I/O to shared storage each time). A trace that knows its jobs sets the `checkpoint` column.
DEFAULT_CHECKPOINT_SECONDS = 1800.0
#: Tolerance of a progress that lands on a checkpoint (0.7 / 0.1 is 6.999…).
_EPSILON = 1e-9


#: The reasons Kueue gives an eviction that frees quota for another workload.
PREEMPTION_REASONS = ("Preempted", "InClusterQueue", "InCohortReclamation", "InCohortFairSharing")


@dataclass(frozen=True)
class Admission:
    """One stretch during which a job held quota: from `Admitted` to its end (None: still held at run end)."""

    start: float
    end: float | None = None
    #: "finished", "evicted" or "" while still held
    ended_by: str = ""
    reason: str = ""
    #: when the replay first saw one of this admission's pods `Running` (None: none ran)
    running: float | None = None
    #: the job's progress (trace seconds of work) its pods resumed from: they ran `duration − resumed_from`
    resumed_from: float = 0.0

    def length(self, until: float) -> float:
        return max(0.0, (until if self.end is None else self.end) - self.start)

    def overlap(self, lo: float, hi: float, until: float) -> float:
        end = until if self.end is None else self.end
        return max(0.0, min(end, hi) - max(self.start, lo))

    @property
    def preempted(self) -> bool:
        return self.ended_by == "evicted" and any(r in self.reason for r in PREEMPTION_REASONS)


@dataclass(frozen=True)
class Stretch:
    """What one admission did (trace seconds of the job's own clock; × accelerators for the fleet's)."""

    #: quota held: `Admitted` → finished, evicted or the end of the run
    held: float
    #: work the pods ran: the rest of the job's duration for an admission that finished it, from the pods'
    #: first `Running` to the end otherwise (never more than the work left)
    work: float
    #: held − work (≥ 0): the controllers' lag, admission → pods running and pods done → quota released
    lag: float
    #: work thrown away when the job resumes from its last checkpoint: since that checkpoint for an eviction,
    #: and work done again (a resume from behind the last checkpoint) for any admission
    lost: float
    #: work an eviction threw away when the job restarts from scratch: all this admission ran (0 unless evicted)
    lost_from_scratch: float
    #: the job's progress when this admission ended (what its last checkpoint keeps, for an evicted one)
    kept_until: float


def checkpoint_before(progress: float, interval: float) -> float:
    """The last checkpoint at or before `progress` (0 when the job never checkpoints: `interval` 0)."""
    if interval <= 0 or progress <= 0:
        return 0.0
    return math.floor(progress / interval + _EPSILON) * interval


def stretches(admissions: Sequence[Admission], duration: float, interval: float, until: float) -> list[Stretch]:
    """Each admission's work, lag and loss. An admission starts its pods at its `resumed_from` (what the replay
    gave them); a job resumed from behind its last checkpoint (the replay could not shorten its pods in time)
    runs that stretch again, and the rerun counts as lost."""
    out: list[Stretch] = []
    kept = 0.0  # the furthest checkpoint (or finish) the job has reached
    for adm in admissions:
        end = until if adm.end is None else adm.end
        held = max(0.0, end - adm.start)
        left = max(0.0, duration - adm.resumed_from)
        if adm.ended_by == "finished":
            work = left
        elif adm.running is None or adm.running > end:
            work = 0.0
        else:
            work = min(left, end - adm.running)
        progress = adm.resumed_from + work
        if adm.ended_by == "finished":
            reached = duration
        elif adm.ended_by == "evicted":
            reached = max(adm.resumed_from, checkpoint_before(progress, interval))
        else:  # still running when the replay stopped: nothing thrown away
            reached = progress
        gained = max(0.0, reached - max(kept, adm.resumed_from))
        out.append(
            Stretch(
                held=held,
                work=work,
                lag=max(0.0, held - work),
                lost=work - gained,
                lost_from_scratch=work if adm.ended_by == "evicted" else 0.0,
                kept_until=reached,
            )
        )
        kept = max(kept, reached)
    return out


def resume_point(admissions: Sequence[Admission], duration: float, interval: float, until: float) -> float:
    """The progress a job resumes from after its last eviction: its last checkpoint (0: from scratch)."""
    return max((s.kept_until for s in stretches(admissions, duration, interval, until)), default=0.0)
