"""The mapping table of the "Migrating from Training Operator v1" page, generated from the field table so the
page cannot drift from what the converter does (`make docs` rewrites it; a test compares)."""

from __future__ import annotations

import json

from trainer_infra.migrate.mapping import ENTRIES, NODE_PATCH, PATCH, POD_PATCH, Disposition, Entry

BEGIN = "<!-- BEGIN generated mapping table: make docs -->"
END = "<!-- END generated mapping table -->"
SHORT = (
    (NODE_PATCH, "runtimePatches: the job's `node` container ."),
    (POD_PATCH, "runtimePatches: the job's pod ."),
    (PATCH, "runtimePatches: the job ."),
)
WHAT = {
    Disposition.MAPPED: "",
    Disposition.SUPERSEDED: "superseded by ",
    Disposition.LOSSY: "**reported**",
    Disposition.TENANCY: "**refused**",
    Disposition.OBSERVED: "not migrated (observed state)",
}


def _field(pattern: str) -> str:
    return pattern.replace("{replicas}", "<kind>ReplicaSpecs").replace(".*.", ".<type>.")


def _target(entry: Entry) -> str:
    text = entry.target
    for long, short in SHORT:
        text = text.replace(long + ".", short)
    if entry.disposition is Disposition.MAPPED:
        since = f" (Trainer ≥ {entry.since}; reported before)" if entry.since else ""
        return f"`{text}`{since}"
    if entry.disposition is Disposition.SUPERSEDED:
        return f"{WHAT[entry.disposition]}{text}"
    return WHAT[entry.disposition]


def _note(entry: Entry) -> str:
    note = entry.why
    if entry.keeps:
        values = " or ".join(f"`{json.dumps(v)}`" for v in entry.keeps)
        note += f" (not reported when {values})"
    return note.replace("|", "\\|")


def table_markdown() -> str:
    lines = [BEGIN, "", "| v1 field | kinds | TrainJob | note |", "|---|---|---|---|"]
    for e in ENTRIES:
        kinds = ", ".join(e.kinds) or "all"
        lines.append(f"| `{_field(e.pattern)}` | {kinds} | {_target(e)} | {_note(e)} |")
    return "\n".join([*lines, "", END])


def updated(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + table_markdown() + text[end:]
