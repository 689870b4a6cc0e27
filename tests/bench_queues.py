"""Render time of the queueing setup for 10/100/1000 teams × 1/10/50 pools (`python -m tests.bench_queues`).

Each pool is a kwok pool of 4 nodes × 8 GPUs; each team has a quota on one pool (cohort may
oversubscribe) and so a ClusterQueue listing every pool as a flavor. Prints per size: Pulumi resources,
manifest KiB, wall and CPU seconds of the full offline render (the real program under mocks), resources
and KiB per CPU second (constant KiB/s = linear in output size), and the CPU seconds of the pure plan.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from tests.helpers import MINIMAL, render
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

TEAMS = (10, 100, 1000)
POOLS = (1, 10, 50)


def synthetic(teams: int, pools: int) -> dict[str, Any]:
    node = {"cpu": "96", "memory": "1536Gi", "accelerator": {"count": 8}}
    return {
        **MINIMAL,
        "nodePools": [
            {"name": f"pool-{p}", "backend": "kwok", "node": node, "kwok": {"layout": [1, 2, 2]}} for p in range(pools)
        ],
        "teams": [{"name": f"team-{t}", "quota": {f"pool-{t % pools}": {"gpus": 8}}} for t in range(teams)],
        "queues": {"cohort": {"oversubscribe": True}, "placement": {"default": {"preferred": "rack"}}},
    }


def measure(teams: int, pools: int) -> tuple[int, float, float, float, float]:
    """(resources, render wall s, render CPU s, plan CPU s, KiB of manifests): CPU time stays honest on a
    shared machine; a ClusterQueue grows with the pool count, so size, not count, is what scales."""
    raw = synthetic(teams, pools)
    started = time.process_time()
    build_plan(validate(raw))
    plan_s = time.process_time() - started
    wall, cpu = time.perf_counter(), time.process_time()
    rendered = render(raw, "bench")
    kib = len(json.dumps(rendered.manifests)) / 1024
    return len(rendered.resources), time.perf_counter() - wall, time.process_time() - cpu, plan_s, kib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--teams", type=int, nargs="*", default=list(TEAMS))
    parser.add_argument("--pools", type=int, nargs="*", default=list(POOLS))
    args = parser.parse_args()
    head = ("teams", "pools", "resources", "KiB", "wall s", "cpu s", "res/s (cpu)", "KiB/s (cpu)", "plan cpu s")
    print("{:>6} {:>6} {:>10} {:>8} {:>8} {:>8} {:>12} {:>12} {:>11}".format(*head))
    for teams in args.teams:
        for pools in args.pools:
            n, wall, cpu, plan_s, kib = measure(teams, pools)
            row = (teams, pools, n, f"{kib:.0f}", f"{wall:.2f}", f"{cpu:.2f}", f"{n / cpu:.0f}", f"{kib / cpu:.0f}")
            print("{:>6} {:>6} {:>10} {:>8} {:>8} {:>8} {:>12} {:>12}".format(*row), f"{plan_s:>11.3f}", flush=True)


if __name__ == "__main__":
    main()
