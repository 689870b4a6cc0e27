"""Seeded synthetic traces with the shape of real GPU-cluster traces (docs/simulate.md).

What published cluster traces (Philly, Alibaba PAI, Helios) agree on, and what this reproduces:
durations are heavy-tailed (most jobs are minutes long, a few run for days: log-normal body, Pareto tail);
sizes are powers of two, mostly small; submissions come in bursts (a sweep submits many jobs at once);
a few teams submit most of the work. The same seed gives the same trace, byte for byte.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainer_infra.simulate.trace import TraceRow

#: Total accelerators of a job and its probability (powers of two, small ones most common).
SIZES: tuple[tuple[int, float], ...] = (
    (1, 0.30),
    (2, 0.15),
    (4, 0.15),
    (8, 0.20),
    (16, 0.10),
    (32, 0.06),
    (64, 0.03),
    (128, 0.01),
)


@dataclass(frozen=True)
class TraceShape:
    """What a synthetic trace looks like."""

    jobs: int
    #: team → relative demand (accelerator-seconds submitted); unequal on purpose
    teams: Mapping[str, float]
    #: accelerators per node of the pool the jobs are sized for (a job > this spans whole nodes)
    accelerators_per_node: int = 8
    #: offered load: submitted accelerator-seconds / (capacity × span); > 1 builds a queue
    load: float = 1.2
    capacity: int = 256
    median_duration: float = 1800.0
    max_duration: float = 3 * 86400.0
    #: share of jobs that arrive in a burst (a sweep), and the burst size range
    burst_share: float = 0.3
    burst_size: tuple[int, int] = (5, 40)
    #: priority → probability (empty: no priority column)
    priorities: Mapping[str, float] | None = None
    #: largest job, in accelerators (jobs of the table above that are larger are left out)
    max_accelerators: int = 128


def _duration(rng: random.Random, shape: TraceShape) -> float:
    """Log-normal body (σ 1.5 around the median) with a Pareto tail (α 1.2) for one job in ten."""
    if rng.random() < 0.1:
        value = shape.median_duration * 4 * rng.paretovariate(1.2)
    else:
        value = rng.lognormvariate(math.log(shape.median_duration), 1.5)
    return float(min(shape.max_duration, max(60, round(value))))


def _size(rng: random.Random, shape: TraceShape) -> tuple[int, int]:
    """(nodes, accelerators per node) of a power-of-two job."""
    sizes = [(s, p) for s, p in SIZES if s <= shape.max_accelerators]
    total = rng.choices([s for s, _ in sizes], weights=[p for _, p in sizes])[0]
    per_node = shape.accelerators_per_node
    return (1, total) if total <= per_node else (total // per_node, per_node)


def _pick(rng: random.Random, weights: Mapping[str, float]) -> str:
    names = sorted(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def generate(shape: TraceShape, seed: int) -> list[TraceRow]:
    """A trace of `shape.jobs` jobs; submit times spread so that the offered load is `shape.load`."""
    if shape.jobs < 1 or not shape.teams or min(shape.teams.values()) <= 0:
        raise ValueError("a trace needs at least one job and teams with positive demand")
    rng = random.Random(seed)
    # Teams' demand is steered by how many jobs each submits (sizes and durations share one distribution).
    drafts: list[tuple[str, int, int, float]] = []
    while len(drafts) < shape.jobs:
        team = _pick(rng, shape.teams)
        burst = rng.random() < shape.burst_share
        count = rng.randint(*shape.burst_size) if burst else 1
        nodes, per_node = _size(rng, shape)
        for _ in range(min(count, shape.jobs - len(drafts))):
            # a sweep repeats one size; its durations still vary
            drafts.append((team, nodes, per_node, _duration(rng, shape)))
            if not burst:
                break
    work = sum(n * a * d for _, n, a, d in drafts)
    span = work / (shape.capacity * shape.load)
    rows: list[TraceRow] = []
    index, clock = 0, 0.0
    mean_gap = span / shape.jobs
    while index < len(drafts):
        team = drafts[index][0]
        group = 1
        while index + group < len(drafts) and drafts[index + group][0] == team and group < shape.burst_size[1]:
            group += 1
        for offset in range(group):
            _, nodes, per_node, duration = drafts[index + offset]
            rows.append(
                TraceRow(
                    submit=round(clock + offset * rng.uniform(0, 2), 1),
                    team=team,
                    nodes=nodes,
                    accelerators=per_node,
                    duration=duration,
                    priority=_pick(rng, shape.priorities) if shape.priorities else None,
                    name=f"{team}-{index + offset:05d}"[:63],
                )
            )
        clock += rng.expovariate(1 / (mean_gap * group))
        index += group
    return sorted(rows, key=lambda r: (r.submit, str(r.name)))


def parse_weights(text: str, what: str) -> dict[str, float]:
    """`nlp:3,vision:1` → {"nlp": 3.0, "vision": 1.0} (ValueError naming `what`)."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition(":")
        try:
            out[name.strip()] = float(value) if value else 1.0
        except ValueError:
            raise ValueError(f"{what}: {part!r} is not NAME:NUMBER") from None
        if out[name.strip()] <= 0:
            raise ValueError(f"{what}: {part!r} must be positive")
    if not out:
        raise ValueError(f"{what}: expected NAME:NUMBER[,NAME:NUMBER...]")
    return out


def summary(rows: Sequence[TraceRow]) -> str:
    """One line: jobs, teams' shares of the accelerator-seconds, span."""
    total = sum(r.accelerator_seconds for r in rows) or 1.0
    teams: dict[str, float] = {}
    for r in rows:
        teams[r.team] = teams.get(r.team, 0.0) + r.accelerator_seconds
    shares = ", ".join(f"{t} {v / total:.0%}" for t, v in sorted(teams.items()))
    span = max(r.submit for r in rows) if rows else 0.0
    return f"{len(rows)} jobs over {span / 3600:.1f} h of submissions; demand: {shares}"
