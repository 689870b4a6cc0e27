"""`trainer-infra trace generate` and `trainer-infra simulate`: argument parsing and the two commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.simulate.facts import StackFacts
from trainer_infra.simulate.generate import TraceShape, generate, parse_weights, summary
from trainer_infra.simulate.trace import dump_trace, load_trace, trace_format
from trainer_infra.simulate.work import DEFAULT_CHECKPOINT_SECONDS


def add_trace_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="trace file to write (.csv, or .jsonl for JSON Lines)")
    p.add_argument("--seed", type=int, default=1, help="the same seed gives the same trace (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=500, help="number of jobs (default: %(default)s)")
    p.add_argument(
        "--teams", required=True, help="team:relative-demand,… e.g. nlp:4,vision:1 (names of the stack's teams)"
    )
    p.add_argument("--capacity", type=int, default=256, help="accelerators of the fleet (default: %(default)s)")
    p.add_argument("--load", type=float, default=1.2, help="offered load; > 1 builds a queue (default: %(default)s)")
    p.add_argument("--accelerators-per-node", type=int, default=8, help="(default: %(default)s)")
    p.add_argument("--median-duration", type=float, default=1800, help="seconds (default: %(default)s)")
    p.add_argument("--max-accelerators", type=int, default=128, help="largest job (default: %(default)s)")
    p.add_argument("--priorities", help="priority:probability,… e.g. low:1,normal:3,high:0.2 (default: none)")


def cmd_trace_generate(args: argparse.Namespace) -> int:
    try:
        shape = TraceShape(
            jobs=args.jobs,
            teams=parse_weights(args.teams, "--teams"),
            accelerators_per_node=args.accelerators_per_node,
            load=args.load,
            capacity=args.capacity,
            median_duration=args.median_duration,
            max_accelerators=args.max_accelerators,
            priorities=parse_weights(args.priorities, "--priorities") if args.priorities else None,
        )
        rows = generate(shape, args.seed)
    except ValueError as exc:
        raise ConfigError([ConfigIssue("arguments", str(exc))]) from None
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_trace(rows, trace_format(out)))
    print(f"wrote {out}: {summary(rows)}", file=sys.stderr)
    return 0


def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="the trace to replay (.csv or .jsonl; docs/simulate.md)")
    p.add_argument("--out", required=True, help="report directory (summary.json, jobs.csv, usage.csv, plots)")
    p.add_argument(
        "--compression",
        type=float,
        default=60.0,
        help="trace seconds per wall second (default: %(default)s: a trace hour replays in a minute)",
    )
    p.add_argument(
        "--max-wall",
        type=float,
        default=1800.0,
        help="stop after this many wall seconds of replay and report what was measured (default: %(default)s)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument(
        "--checkpoint",
        type=float,
        default=DEFAULT_CHECKPOINT_SECONDS,
        help="trace seconds of work between checkpoints of a job whose trace row gives none; a preempted job "
        "resumes from its last one (0: jobs restart from scratch; default: %(default)s)",
    )
    p.add_argument(
        "--build",
        action="store_true",
        help="first build the control plane's binaries that are missing (`trainer-infra sandbox build`: needs Go "
        "and the Go module proxy, no root; ≈ 17 min cold on 2 cores, seconds when built)",
    )


def cmd_simulate(args: argparse.Namespace, facts: StackFacts, releases: list[dict[str, Any]], stack: str) -> int:
    """Replay a trace on the stack and write the report; exit 0 complete, 1 stopped early, 2 bad input."""
    from trainer_infra.sandbox.versions import BINARIES, BuildError, VersionSet
    from trainer_infra.simulate.report import write
    from trainer_infra.simulate.session import simulate

    try:
        import cryptography  # noqa: F401  (the control plane's throwaway CA)
    except ImportError:
        print(
            "trainer-infra simulate needs the simulate extra: pip install 'trainer-platform[simulate]'", file=sys.stderr
        )
        return 2

    if args.compression <= 0 or args.max_wall <= 0:
        raise ConfigError([ConfigIssue("arguments", "--compression and --max-wall must be positive")])
    if not 0 <= args.checkpoint < float("inf"):
        raise ConfigError([ConfigIssue("arguments", "--checkpoint must be 0 (never) or a number of seconds", None)])
    rows = load_trace(Path(args.trace))
    try:
        facts.check(rows)
    except ConfigError as exc:
        raise ConfigError(exc.issues, args.trace) from None
    if not facts.pools:
        hint = "simulate lays out kwok pools (nodePools[].backend: kwok); add one with the shape of your GPU nodes"
        raise ConfigError([ConfigIssue("nodePools", "the stack renders no kwok nodes to replay on", None, hint)])
    try:
        if args.build:
            from trainer_infra.sandbox.build import Builder

            Builder(VersionSet.from_env()).build(only=set(BINARIES))
        run = simulate(
            facts,
            releases,
            rows,
            compression=args.compression,
            bound=args.max_wall,
            label=stack,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
            checkpoint=args.checkpoint,
        )
    except BuildError as exc:
        print(f"trainer-infra simulate: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trainer-infra simulate: interrupted before the replay started; nothing is left running", file=sys.stderr)
        return 1
    out = Path(args.out)
    for note in write(run, out, plots=not args.no_plots):
        print(f"NOTE: {note}", file=sys.stderr)
    data = json.loads((out / "summary.json").read_text())
    print(f"{'complete' if run.stopped_early == '' else 'INCOMPLETE'}: report in {out}/")
    print(
        f"  utilisation {data['utilisation']}, goodput {data['goodput']} (from scratch "
        f"{data['goodput_from_scratch']}), weighted fairness {data['weighted_fairness']}, "
        f"preemptions {data['preemptions']}, jobs {data['status']}"
    )
    lag = data["lag_per_admission"]
    print(
        f"  controllers' lag per admission: mean {lag['wall_seconds']['mean']} wall s "
        f"({lag['trace_minutes']['mean']} trace min), p95 {lag['wall_seconds']['p95']} wall s "
        f"({lag['trace_minutes']['p95']} trace min)"
    )
    for team, wait in data["waits"].items():
        print(f"  {team}: wait p50 {wait['p50']} s, p95 {wait['p95']} s, max {wait['max']} s (trace time)")
    print(f"  wall {data['wall_seconds']} s at {run.compression:g}× ({data['wall_phases']})")
    if run.stopped_early:
        print(f"STOPPED EARLY: {run.stopped_early}", file=sys.stderr)
        return 1
    return 0
