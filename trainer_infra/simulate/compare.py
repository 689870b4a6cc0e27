"""`trainer-infra simulate-diff BASE HEAD`: what a stack change does to each team, from two `simulate` reports
of the same trace (the pull request's base and head): wait, share of the fleet, and utilisation.

Pure: reads two summary.json documents, writes Markdown (the PR comment) or text. A run that stopped early,
runs of different traces or compressions are said in the output, never hidden.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trainer_infra.core.errors import ConfigError, ConfigIssue

Summary = Mapping[str, Any]


def load_summary(path: Path) -> Summary:
    """A report's summary.json (a report directory or the file itself)."""
    file = path / "summary.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        hint = "pass the --out folder of simulate, or its summary.json"
        raise ConfigError([ConfigIssue(str(path), f"not a simulate report: {exc}", None, hint)]) from None
    if not isinstance(data, dict) or "waits" not in data or "utilisation" not in data:
        raise ConfigError([ConfigIssue(str(file), "not a simulate summary.json (no waits/utilisation)")])
    return data


def _minutes(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds / 60:,.0f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _delta(base: float | None, head: float | None, fmt: Callable[[float], str]) -> str:
    if base is None or head is None:
        return ""
    diff = head - base
    return "±0" if abs(diff) < 1e-9 else ("+" if diff > 0 else "−") + fmt(abs(diff))


def _wait(s: Summary, team: str, key: str) -> float | None:
    value = s["waits"].get(team, {}).get(key)
    return None if value is None else float(value)


def _share(s: Summary, team: str) -> float | None:
    value = s.get("team_shares", {}).get(team)
    return None if value is None else float(value)


def differences(base: Summary, head: Summary) -> list[str]:
    """Why the two runs may not be comparable (empty: they are)."""
    notes = []
    for name, s in (("base", base), ("head", head)):
        if not s.get("complete", False):
            notes.append(f"the {name} run stopped early: {s.get('stopped_early')}")
    if base.get("trace_accelerator_seconds") != head.get("trace_accelerator_seconds") or base.get("jobs") != head.get(
        "jobs"
    ):
        notes.append("the two runs replayed different traces")
    if base.get("compression") != head.get("compression"):
        notes.append(f"different compressions ({base.get('compression')}× and {head.get('compression')}×)")
    return notes


def render(base: Summary, head: Summary, *, markdown: bool = True) -> str:
    """Per team: wait p50/p95 (trace minutes) and share of the admitted accelerator-seconds, base → head;
    then the fleet's utilisation, goodput both ways, weighted fairness and preemptions."""
    teams = sorted(set(base["waits"]) | set(head["waits"]) | set(base.get("team_shares", {})))
    rows: list[list[str]] = [["team", "p50 wait (min)", "p95 wait (min)", "share of the fleet"]]
    for team in teams:
        cells = [team]
        for key in ("p50", "p95"):
            b, h = _wait(base, team, key), _wait(head, team, key)
            cells.append(f"{_minutes(b)} → {_minutes(h)} {_delta(b, h, lambda d: f'{d / 60:,.0f}')}".rstrip())
        b, h = _share(base, team), _share(head, team)
        cells.append(f"{_pct(b)} → {_pct(h)} {_delta(b, h, lambda d: f'{100 * d:.1f} pt')}".rstrip())
        rows.append(cells)
    fleet: list[tuple[str, str, Callable[[float], str]]] = [
        ("utilisation", "utilisation", lambda v: f"{v:.3f}"),
        ("goodput (jobs resume from their last checkpoint)", "goodput", lambda v: f"{v:.3f}"),
        ("goodput if preempted jobs restarted from scratch", "goodput_from_scratch", lambda v: f"{v:.3f}"),
        ("weighted fairness", "weighted_fairness", lambda v: f"{v:.3f}"),
        ("preemptions", "preemptions", lambda v: f"{v:.0f}"),
        ("accelerator-hours thrown away by preemption", "preempted_accelerator_seconds", lambda v: f"{v / 3600:,.0f}"),
    ]
    lines: list[str] = []
    if markdown:
        lines += ["| " + " | ".join(r) + " |" for r in rows[:1]]
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        lines.append("")
        for label, key, fmt in fleet:
            b, h = base.get(key), head.get(key)
            lines.append(f"- {label}: {'–' if b is None else fmt(b)} → {'–' if h is None else fmt(h)}")
    else:
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        for label, key, fmt in fleet:
            b, h = base.get(key), head.get(key)
            lines.append(f"{label}: {'-' if b is None else fmt(b)} -> {'-' if h is None else fmt(h)}")
    notes = differences(base, head)
    if notes:
        lines.append("")
        lines += [("**Not comparable as is:** " if markdown else "NOTE: ") + n for n in notes]
    lines.append("")
    lines.append(
        f"Trace time; {head.get('jobs')} jobs at {head.get('compression')}×, "
        f"wall {base.get('wall_seconds')} s (base) and {head.get('wall_seconds')} s (head)."
    )
    return "\n".join(lines) + "\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", type=Path, help="report of the base (simulate --out, or its summary.json)")
    p.add_argument("head", type=Path, help="report of the head, same trace")
    p.add_argument("--format", choices=("text", "markdown"), default="text")


def cmd_simulate_diff(args: argparse.Namespace) -> int:
    """Exit 0; 1 when the runs are not comparable as they are (stopped early, other trace); 2 bad input."""
    base, head = load_summary(args.base), load_summary(args.head)
    sys.stdout.write(render(base, head, markdown=args.format == "markdown"))
    return 1 if differences(base, head) else 0
