"""`trainer-infra trace generate` and `trainer-infra simulate`: argument parsing and the two commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.simulate.generate import TraceShape, generate, parse_weights, summary
from trainer_infra.simulate.trace import dump_trace, trace_format


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
