"""The workload trace `simulate` replays: one row per training job, read from CSV or JSON Lines.

Columns (docs/simulate.md): `submit` (seconds after the trace starts), `team`, `nodes`, `accelerators`
(per node), `duration` (seconds the job runs once admitted), optional `priority`, `runtime`, `name` and
`checkpoint` (seconds of work between the job's checkpoints).
A row is checked as a whole file at once: every bad row is named by its line and field, so a trace from a
converter is fixed in one round.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainer_infra.core.errors import ConfigError, ConfigIssue, format_path
from trainer_infra.core.types import DnsLabel

#: Column order of a written trace (CSV header).
COLUMNS = ("submit", "team", "nodes", "accelerators", "duration", "priority", "runtime", "name", "checkpoint")
REQUIRED = ("submit", "team", "nodes", "accelerators", "duration")
#: Largest job the format accepts: a typo (1e9 nodes) is an error, not a never-admissible job.
MAX_NODES = 100_000


class TraceRow(BaseModel):
    """One job of a trace."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    submit: float = Field(ge=0, allow_inf_nan=False, description="Seconds after the trace starts.")
    team: DnsLabel = Field(description="A team of the stack (`teams[].name`).")
    nodes: int = Field(ge=1, le=MAX_NODES, description="Nodes (pods) the job runs on.")
    accelerators: int = Field(ge=1, le=64, description="Accelerators per node.")
    duration: float = Field(gt=0, allow_inf_nan=False, description="Seconds the job runs once admitted.")
    priority: str | None = Field(default=None, description="A WorkloadPriorityClass of the stack.")
    runtime: str | None = Field(default=None, description="A ClusterTrainingRuntime of the stack.")
    name: DnsLabel | None = Field(default=None, description="Job name (default: job-<line>).")
    checkpoint: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Seconds of work between the job's checkpoints; 0: it never checkpoints (a preempted job "
        "restarts from scratch); absent: the replay's default.",
    )

    def checkpoint_interval(self, default: float) -> float:
        """Seconds of work between checkpoints: the row's own, else `default` (0: never checkpoints)."""
        return default if self.checkpoint is None else self.checkpoint

    @property
    def total_accelerators(self) -> int:
        return self.nodes * self.accelerators

    @property
    def accelerator_seconds(self) -> float:
        return self.total_accelerators * self.duration


class TraceError(ConfigError):
    """Every bad row of a trace, each named `<file>:<line>: <field>`."""


def _csv_records(text: str) -> Iterable[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    unknown = [c for c in reader.fieldnames or () if c not in COLUMNS]
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
    if unknown or missing:
        found = ",".join(reader.fieldnames or ())
        what = f"unknown column(s) {unknown}" if unknown else f"missing column(s) {missing}"
        raise TraceError([ConfigIssue("line 1", f"header: {what}; expected {', '.join(COLUMNS)}", found)])
    for record in reader:
        if None in record:
            yield reader.line_num, {"__extra__": record[None]}
            continue
        yield reader.line_num, {k: v for k, v in record.items() if v not in ("", None)}


def _jsonl_records(text: str) -> Iterable[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, {"__json__": exc.msg}
            continue
        yield number, record if isinstance(record, dict) else {"__json__": "not a JSON object"}


def parse_trace(text: str, fmt: str) -> list[TraceRow]:
    """Rows of a trace in `fmt` (`csv` or `jsonl`); every malformed row reported at once."""
    records = _jsonl_records(text) if fmt == "jsonl" else _csv_records(text)
    rows: list[TraceRow] = []
    issues: list[ConfigIssue] = []
    for line, record in records:
        if "__extra__" in record:
            issues.append(ConfigIssue(f"line {line}", "more fields than the header has", str(record["__extra__"])))
            continue
        if "__json__" in record:
            issues.append(ConfigIssue(f"line {line}", "not a JSON object", str(record["__json__"])))
            continue
        record.setdefault("name", None)
        if record["name"] is None:
            record["name"] = f"job-{line}"
        try:
            rows.append(TraceRow.model_validate(record))
        except ValidationError as exc:
            for err in exc.errors():
                field = format_path(err["loc"])
                found = repr(err.get("input")) if err["type"] != "missing" else None
                issues.append(ConfigIssue(f"line {line}: {field}", err["msg"], found))
    names = [r.name for r in rows]
    duplicates = sorted({n for n in names if n and names.count(n) > 1})
    if duplicates:
        issues.append(ConfigIssue("name", "job names must be unique", ", ".join(duplicates[:5])))
    if issues:
        raise TraceError(issues)
    if not rows:
        raise TraceError([ConfigIssue("line 1", "the trace has no jobs")])
    return sorted(rows, key=lambda r: (r.submit, str(r.name)))


def trace_format(path: Path) -> str:
    """`jsonl` for .jsonl/.ndjson/.json files, `csv` otherwise."""
    return "jsonl" if path.suffix.lower() in (".jsonl", ".ndjson", ".json") else "csv"


def load_trace(path: Path) -> list[TraceRow]:
    """Read and check a trace file (TraceError names its file, line and field)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise TraceError([ConfigIssue("", f"cannot read the trace: {exc.strerror}", str(path))], str(path)) from None
    try:
        return parse_trace(text, trace_format(path))
    except TraceError as exc:
        raise TraceError(exc.issues, str(path)) from None


def dump_trace(rows: Sequence[TraceRow], fmt: str = "csv") -> str:
    """A trace as text, in the column order above (what `load_trace` reads back unchanged)."""
    if fmt == "jsonl":
        return "".join(json.dumps(r.model_dump(exclude_none=True)) + "\n" for r in rows)
    # the checkpoint column only when a row has one: a trace without it stays readable by an older replay
    columns = COLUMNS if any(r.checkpoint is not None for r in rows) else COLUMNS[:-1]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        record = row.model_dump()
        writer.writerow({k: ("" if record[k] is None else _number(record[k])) for k in columns})
    return out.getvalue()


def _number(value: Any) -> Any:
    """Whole floats written without `.0` (a trace file stays readable)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
