"""What `migrate` prints and writes: the per-job report, the per-namespace inventory, the TrainJob YAML.

Output is deterministic (keys sorted, jobs in input order) and written all at once: a directory is filled
under a temporary name and renamed into place, so a failed run leaves no partial files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.migrate.mapping import Disposition
from trainer_infra.migrate.result import Result, Status

LABEL = {
    Disposition.LOSSY: "reported",
    Disposition.TENANCY: "refused",
    Disposition.SUPERSEDED: "note",
    Disposition.MAPPED: "note",
}
COLUMNS = (Status.CLEAN, Status.ALLOWED, Status.NEEDS_FLAG, Status.REFUSED, Status.CANNOT)


class OutputError(Exception):
    pass


def dump(trainjobs: list[dict[str, Any]]) -> str:
    return "".join(
        "---\n" + yaml.safe_dump(t, sort_keys=True, default_flow_style=False, allow_unicode=True, width=120)
        for t in trainjobs
    )


def job_report(r: Result, verbose: bool = False) -> list[str]:
    head = f"{r.doc.where}: {r.kind or r.doc.obj.get('kind')} {r.namespace or '?'}/{r.name or '?'}"
    lines = [f"{head} → {r.status}" + (f" (runtime {r.runtime}: {r.reason})" if r.runtime else "")]
    if r.refusal:
        lines.append(f"  refused at admission: {r.refusal}")
    for f in r.findings:
        if f.disposition in (Disposition.OBSERVED,) or (
            f.disposition in LABEL and LABEL[f.disposition] == "note" and not verbose
        ):
            continue
        mark = " (allowed)" if f.allowed else ""
        lines.append(f"  {LABEL[f.disposition]}{mark} {f.path}: {f.message}")
    lines.extend("  error " + e.render().replace("\n", "\n  ") for e in r.errors)
    if r.status == Status.NEEDS_FLAG:
        names = ",".join(f.path for f in r.findings if f.disposition is Disposition.LOSSY and not f.allowed)
        lines.append(f"  to convert it anyway: --allow-lossy {names}")
    return lines


def _reason(r: Result) -> str:
    if r.errors:
        return r.errors[0].message
    if r.refusal:
        return r.refusal
    lossy = [f for f in r.findings if f.disposition is Disposition.LOSSY and not f.allowed]
    return lossy[0].message if lossy else ""


def inventory(results: list[Result]) -> list[str]:
    """Per namespace and kind: how many convert cleanly, need a flag, are refused or cannot, and why."""
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    reasons: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in results:
        key = (r.namespace or str(r.doc.obj.get("metadata", {}).get("namespace", "?")), r.kind or "?")
        counts[key][r.status] += 1
        if _reason(r):
            reasons[key][f"{r.status}: {_reason(r)}"] += 1
    lines = [f"{'NAMESPACE':<20} {'KIND':<26} " + " ".join(f"{c.upper():>19}" for c in COLUMNS)]
    for key in sorted(counts):
        lines.append(f"{key[0]:<20} {key[1]:<26} " + " ".join(f"{counts[key][c]:>19}" for c in COLUMNS))
        for reason, n in sorted(reasons[key].items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"    {n} × {reason}")
    return lines


def file_name(trainjob: dict[str, Any]) -> str:
    md = trainjob["metadata"]
    return f"{md['namespace']}/{md['name']}.yaml"


def write_dir(out: Path, trainjobs: list[dict[str, Any]]) -> None:
    """One file per TrainJob (`<namespace>/<name>.yaml`), all or nothing. `out` must not exist or be empty."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError(f"{out}: exists and is not an empty directory (nothing written)")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for t in trainjobs:
            path = staging / file_name(t)
            path.parent.mkdir(exist_ok=True)
            path.write_text(dump([t]))
        if out.exists():
            out.rmdir()
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
