"""`make bench`: render synthetic stacks of growing size and print resources, seconds and resources/s.

The size knob is the number of teams (each later area adds objects per team: queues, namespaces, RBAC,
storage claims). Timed end to end: the real program under mocks, then assembling and writing the files.
No assertions: the numbers go into notes and reviews, and linear scaling shows as a flat resources/s.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import assemble, write
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

SIZES = (1, 10, 100, 1000)


def synthetic(teams: int) -> dict[str, Any]:
    return {
        "kubernetes": {"version": "1.34"},
        "teams": [{"name": f"team-{i:04d}"} for i in range(teams)],
    }


def measure(raw: dict[str, Any]) -> tuple[int, int, float]:
    started = time.perf_counter()
    plan = build_plan(validate(raw))
    rendered = assemble(capture(lambda: deploy(plan), "bench"))
    with tempfile.TemporaryDirectory() as tmp:
        write(rendered, Path(tmp))
    return len(rendered.resources), len(rendered.manifests), time.perf_counter() - started


def main(sizes: tuple[int, ...] = SIZES) -> None:
    print(f"{'teams':>6} {'resources':>10} {'objects':>8} {'seconds':>8} {'resources/s':>12}")
    for n in sizes:
        resources, objects, seconds = measure(synthetic(n))
        print(f"{n:>6} {resources:>10} {objects:>8} {seconds:>8.2f} {resources / seconds:>12.0f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
