"""What one replay measured: the report and the plots both read it, so it lives apart from both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trainer_infra.simulate.metrics import JobOutcome


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
    #: ClusterQueue → (nominal, the most it may hold) of the accelerator resource
    limits: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: (trace time, ClusterQueue, accelerators reserved) read from ClusterQueue status while replaying
    samples: list[tuple[float, str, int]] = field(default_factory=list)
    #: where the wall time went (phase → seconds)
    phases: Mapping[str, float] = field(default_factory=dict)
    label: str = ""
    #: the latest a TrainJob was created after its row's submit time (trace seconds): the replay's own lag
    submit_lag: float = 0.0
    #: CPU seconds each control-plane process (and the replay itself) used during the replay
    cpu_seconds: Mapping[str, float] = field(default_factory=dict)
    #: what the simulation's Kueue runs with instead of the stack's settings (trainer_infra/simulate/timers.py)
    kueue_changes: list[str] = field(default_factory=list)
    #: the machine's 1-minute load average every 30 wall seconds of the replay
    load_average: list[float] = field(default_factory=list)
    #: team → the nominal quota of its ClusterQueue (accelerators): which jobs are within a team's own quota
    quotas: Mapping[str, int] = field(default_factory=dict)
    #: trace seconds of work between checkpoints of a job whose trace row gives none (0: never)
    checkpoint: float = 0.0
    #: jobs admitted again before the replay could give their pods only the work left after their checkpoint
    resume_failures: list[str] = field(default_factory=list)
