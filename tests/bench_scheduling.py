"""`make bench-scheduling`: what the stack's derived queues are worth, against two baselines, on the real Kueue.

One seeded trace (2,000 jobs by default, four teams of unequal weight and demand) replayed three times, each on
a fresh control plane (trainer-infra simulate):
- derived: the stack's own ClusterQueues (cohort, lending limits, fair-sharing weights, priorities, TAS);
- flat: one BestEffortFIFO ClusterQueue with the whole capacity, every team's LocalQueue pointing to it
  (the utilisation a single shared queue reaches, with no isolation at all);
- partitions: each team's nominal quota, no cohort (no borrowing, no lending, no reclaim).
Each configuration runs `--repeat` times (default 2): the table gives every figure with its repeat, so the
run-to-run spread is read beside the differences. Preempted jobs resume from their last checkpoint (`--checkpoint`).
Prints the table, writes each run's report and plots under `--out` (default build/bench-scheduling/: `derived`,
`derived-2`, ...).
No assertion: the numbers go into docs/simulate.md and the issue.

The stack is `local` with its teams replaced by four (quotas sum to the 256 GPUs): nlp (weight 3, 96 GPUs),
vision (weight 2, 80, lends at most 40), speech (weight 1, 48), robotics (weight 1, 32); demand nlp 4 : vision 2
: speech 1 : robotics 0.5, so robotics, the smallest team, meets the others' backlog.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import assemble
from trainer_infra.simulate.baselines import flat_fifo, static_partitions
from trainer_infra.simulate.facts import stack_facts
from trainer_infra.simulate.generate import TraceShape, generate
from trainer_infra.simulate.generate import summary as trace_summary
from trainer_infra.simulate.report import table, write
from trainer_infra.simulate.session import simulate
from trainer_infra.simulate.trace import dump_trace
from trainer_infra.simulate.work import DEFAULT_CHECKPOINT_SECONDS
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.load import raw_from_stack_document
from trainer_infra.stack.validate import validate

ROOT = Path(__file__).resolve().parents[1]
TEAMS: list[dict[str, Any]] = [
    {"name": "nlp", "fairSharingWeight": 3, "quota": {"h100": {"gpus": 96}}},
    {"name": "vision", "fairSharingWeight": 2, "quota": {"h100": {"gpus": 80, "lendingLimit": {"gpus": 40}}}},
    {"name": "speech", "quota": {"h100": {"gpus": 48}}},
    {"name": "robotics", "quota": {"h100": {"gpus": 32}}},
]
DEMAND = {"nlp": 4.0, "vision": 2.0, "speech": 1.0, "robotics": 0.5}


def bench_stack() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(objects, helm releases) of the local stack with the bench's four teams."""
    path = ROOT / "stacks" / "Pulumi.local.yaml"
    raw = raw_from_stack_document(yaml.safe_load(path.read_text()), str(path))
    raw = copy.deepcopy(raw)
    raw["teams"] = TEAMS
    plan = build_plan(validate(raw, "bench-scheduling"))
    rendered = assemble(capture(lambda: deploy(plan), "bench"))
    return rendered.manifests, rendered.releases


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--seed", type=int, default=29)
    p.add_argument("--load", type=float, default=1.1, help="offered load of the trace (default: %(default)s)")
    p.add_argument("--median-duration", type=float, default=1800.0)
    p.add_argument("--max-duration", type=float, default=6 * 3600.0)
    # 200×: the 2,000-job trace (92 h of submissions, ≈ 105 h of work at full capacity) completed in 43–55 wall
    # minutes per configuration on 2 otherwise idle cores (docs/simulate.md); a job then holds its quota
    # 200 × (the control plane's latency, 7.5–11.7 wall s there) beyond its duration
    p.add_argument("--compression", type=float, default=200.0, help="trace seconds per wall second")
    p.add_argument("--max-wall", type=float, default=4500.0, help="bound of each replay, wall seconds")
    p.add_argument("--configs", nargs="+", default=["derived", "flat", "partitions"])
    p.add_argument(
        "--repeat",
        type=int,
        default=2,
        help="runs of each configuration, one after the other: the table gives every figure with its repeats, the "
        "run-to-run spread beside the differences between configurations (default: %(default)s)",
    )
    p.add_argument(
        "--checkpoint",
        type=float,
        default=DEFAULT_CHECKPOINT_SECONDS,
        help="trace seconds of work between a job's checkpoints (0: preempted jobs restart from scratch; "
        "default: %(default)s)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "build" / "bench-scheduling")
    p.add_argument(
        "--table-only",
        action="store_true",
        help="print the table of the configurations' summary.json already under --out (after running them "
        "as separate processes, e.g. one per machine or namespace, each with its own --configs)",
    )
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    runs = [(name, run_dir(name, k)) for name in args.configs for k in range(1, args.repeat + 1)]
    if args.table_only:
        return print_table(args.out, runs)

    objects, releases = bench_stack()
    configs = {"derived": objects, "flat": flat_fifo(objects), "partitions": static_partitions(objects)}
    facts = stack_facts(objects)
    shape = TraceShape(
        args.jobs,
        DEMAND,
        load=args.load,
        capacity=facts.capacity,
        median_duration=args.median_duration,
        max_duration=args.max_duration,
        priorities={"low": 1, "normal": 4, "high": 0.3},
    )
    rows = generate(shape, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trace.csv").write_text(dump_trace(rows))
    print(f"trace: {trace_summary(rows)}; capacity {facts.capacity}; compression {args.compression:g}×", flush=True)
    for name, folder in runs:
        started = time.monotonic()
        print(f"== {folder}", flush=True)
        run = simulate(
            stack_facts(configs[name]),
            releases,
            rows,
            compression=args.compression,
            bound=args.max_wall,
            label=name,
            progress=lambda line: print(f"   {line}", flush=True),
            checkpoint=args.checkpoint,
        )
        # fairness is judged against the stack's weights, and "within quota" against its quotas, in every configuration
        run.weights, run.quotas = facts.weights(), facts.team_quotas()
        write(run, args.out / folder)
        print(f"   {folder}: {time.monotonic() - started:.0f} s wall", flush=True)
    return print_table(args.out, runs)


def run_dir(config: str, k: int) -> str:
    """The report folder of a configuration's k-th run: `derived`, then `derived-2`, ..."""
    return config if k == 1 else f"{config}-{k}"


def print_table(out: Path, runs: list[tuple[str, str]]) -> int:
    """The comparison of the runs' reports under `out` (table.json beside them); a run not there is left out."""
    results = [
        (name, json.loads((out / folder / "summary.json").read_text()))
        for name, folder in runs
        if (out / folder / "summary.json").exists()
    ]
    print(table(results))
    for name, s in results:
        m = s.get("machine", {})
        print(
            f"{name}: {'complete' if s['complete'] else 'STOPPED EARLY'}, wall {s['wall_seconds']:.0f} s, "
            f"compression {s['compression']:g}×, overhead per job {s['overhead_wall_seconds']['mean']} wall s, "
            f"load average {m.get('load_average_mean')} (max {m.get('load_average_max')}) on {m.get('cpus')} CPUs"
        )
        lag = s.get("lag_per_admission")
        if lag:
            print(
                f"{name}: lag per admission (of {lag['admissions']}): mean {lag['wall_seconds']['mean']} wall s = "
                f"{lag['trace_minutes']['mean']} trace min, p95 {lag['wall_seconds']['p95']} wall s = "
                f"{lag['trace_minutes']['p95']} trace min; held utilisation (lag included) {s.get('held_utilisation')}"
            )
        inside = s.get("within_quota")
        if inside:
            p95 = ", ".join(f"{t} {w['p95'] / 60:.0f}" for t, w in inside["waits"].items() if w["p95"] is not None)
            print(f"{name}: within quota: weighted fairness {inside['weighted_fairness']}; p95 wait (min) {p95}")
        reasons = s.get("preemptions_by_reason", {})
        if reasons:
            lost = ", ".join(
                f"{r} {v['count']} ({v['accelerator_seconds'] / 3600:.0f} acc-h)" for r, v in reasons.items()
            )
            print(f"{name}: preemptions by reason: {lost}")
    table_json: dict[str, list[dict[str, Any]]] = {}
    for name, s in results:
        table_json.setdefault(name, []).append(s)
    (out / "table.json").write_text(json.dumps(table_json, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
