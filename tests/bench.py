"""`make bench`: render time of large synthetic stacks beside Pulumi's mock-engine floor, in one run.

Sizes: 1,000 teams × 10 and × 50 kwok pools (4 nodes × 8 GPUs each); every team has a GPU quota on every
pool, so each team's ClusterQueue lists every pool as a flavor (cohort oversubscribed; the stacks pass
`trainer-infra validate`). `python -m tests.bench --teams 100 --pools 1 10` runs other sizes.

render s = build the plan + capture (the real program under the render's mock engine: TrainingPlatform,
           every registration recorded) + assemble + write manifests.yaml, helm-releases.yaml, resources.json to a
           temporary directory: what `trainer-infra render` times. Not included: process start, imports,
           loading and validating the config (validate s, shown apart).
floor s  = the stock mock engine (`pulumi.runtime.set_mocks` with the stock MockMonitor, default garbage
           collector) registering as many trivial custom resources (no inputs, parented to the stack) as
           the render has Pulumi resources: what any Pulumi program pays per resource.
same-data floor = the stock mock engine registering the render's resources flat, with the same inputs (what
           any Pulumi program sending these objects pays before any work of ours); its ratio is our overhead.
ratio    = render s / floor s. The render pauses the cyclic garbage collector while it registers
           (render/capture.py gc_paused); `floor, gc paused` and the last ratio show the floor under that
           same policy, so the collector's share is not hidden in the ratio.

Seconds are CPU seconds of this process (all threads), stable on a shared machine; wall seconds in
brackets. MiB = size of manifests.yaml: the 50-pool ClusterQueues make the same resource count carry
3-4× the data, which the engine serialises and decodes per property. No assertion here: numbers go into
notes and reviews.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from trainer_infra.program import deploy
from trainer_infra.render.capture import EchoMocks, Registration, capture, gc_paused, run_under_mocks
from trainer_infra.render.output import assemble, write
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import Validated, validate

TEAMS, POOLS = [1000], [10, 50]
MINIMAL: dict[str, Any] = {"kubernetes": {"version": "1.34"}}


def synthetic(teams: int, pools: int) -> dict[str, Any]:
    """`teams` teams, each with a quota of 1 GPU on each of `pools` kwok pools of 4 nodes × 8 GPUs."""
    node = {"cpu": "96", "memory": "1536Gi", "accelerator": {"count": 8}}
    return {
        **MINIMAL,
        "nodePools": [
            {"name": f"pool-{p:02d}", "backend": "kwok", "node": node, "kwok": {"layout": [1, 2, 2]}}
            for p in range(pools)
        ],
        "teams": [
            {"name": f"team-{t:04d}", "quota": {f"pool-{p:02d}": {"gpus": 1} for p in range(pools)}}
            for t in range(teams)
        ],
        "queues": {"cohort": {"oversubscribe": True}, "placement": {"default": {"preferred": "rack"}}},
    }


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float

    def __str__(self) -> str:
        return f"{self.cpu:.2f} ({self.wall:.1f})"


def timed(fn: Callable[[], object]) -> tuple[Any, Timing]:
    """Run `fn` from a collected heap, so one measurement does not pay for the garbage of the one before."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, Timing(time.perf_counter() - wall, time.process_time() - cpu)


def render_once(validated: Validated) -> tuple[int, int, list[Registration]]:
    """The timed render: plan, capture, assemble, write. Returns (Pulumi resources, bytes of manifests.yaml,
    what was registered)."""
    plan = build_plan(validated)
    captured = capture(lambda: deploy(plan), "bench")
    rendered = assemble(captured)
    with tempfile.TemporaryDirectory() as tmp:
        write(rendered, Path(tmp))
        return len(rendered.resources), (Path(tmp) / "manifests.yaml").stat().st_size, captured.registrations


class _Plain(pulumi.CustomResource):
    def __init__(self, token: str, name: str, props: dict[str, Any]) -> None:
        super().__init__(token, name, props)


def data_floor_once(registrations: list[Registration]) -> None:
    """The same resources with the same inputs, registered flat under the stock mock engine: what any Pulumi
    program that sends these objects pays, before any work of ours."""

    def program() -> None:
        for r in registrations:
            _Plain(r.type, r.name, r.inputs)

    run_under_mocks(program, "floor", MockMonitor(EchoMocks()))


class _Trivial(pulumi.CustomResource):
    def __init__(self, name: str) -> None:
        super().__init__("bench:index:Trivial", name, {})


def floor_once(count: int) -> None:
    """`count` trivial resources under the stock mock engine (fresh stack, same setup as the render)."""

    def program() -> None:
        for i in range(count):
            _Trivial(f"r{i}")

    run_under_mocks(program, "floor", MockMonitor(EchoMocks()))


def floor_gc_paused(count: int) -> None:
    with gc_paused():
        floor_once(count)


@dataclass(frozen=True)
class Row:
    teams: int
    pools: int
    resources: int
    mib: float
    validate: Timing
    render: Timing
    floor: Timing
    floor_paused: Timing
    data_floor: Timing

    def cells(self) -> tuple[object, ...]:
        r, f, p, d = self.render.cpu, self.floor.cpu, self.floor_paused.cpu, self.data_floor.cpu
        head = (self.teams, self.pools, self.resources, f"{self.mib:.1f}", self.validate, self.render)
        return (*head, self.floor, f"{r / f:.2f}", self.floor_paused, f"{r / p:.2f}", self.data_floor, f"{r / d:.2f}")


def measure(teams: int, pools: int) -> Row:
    validated, validating = timed(lambda: validate(synthetic(teams, pools)))
    (count, size, registrations), render = timed(lambda: render_once(validated))
    _, floor = timed(lambda: floor_once(count))
    _, paused = timed(lambda: floor_gc_paused(count))
    _, data = timed(lambda: data_floor_once(registrations))
    return Row(teams, pools, count, size / 2**20, validating, render, floor, paused, data)


COLUMNS = (
    "teams",
    "pools",
    "resources",
    "MiB",
    "validate s",
    "render s",
    "floor s",
    "ratio",
    "floor, gc paused",
    "ratio",
    "same-data floor",
    "ratio",
)
FORMAT = "{:>5} {:>5} {:>9} {:>5} {:>12} {:>13} {:>12} {:>5} {:>16} {:>5} {:>15} {:>5}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teams", type=int, nargs="*", default=TEAMS)
    parser.add_argument("--pools", type=int, nargs="*", default=POOLS)
    args = parser.parse_args()
    print(__doc__.split("\n\n", 2)[2])
    print(FORMAT.format(*COLUMNS))
    for teams in args.teams:
        for pools in args.pools:
            print(FORMAT.format(*(str(c) for c in measure(teams, pools).cells())), flush=True)


if __name__ == "__main__":
    main()
