"""The deputy inventory as docs/teams.md shows it, between its markers (`make docs` writes it)."""

from __future__ import annotations

from trainer_infra.datacache.deputies import inventory

BEGIN = "<!-- BEGIN deputies (generated from trainer_infra/datacache/deputies.py by `make docs`) -->"
END = "<!-- END deputies -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def inventory_markdown() -> str:
    """The inventory as docs/teams.md shows it (the data cache's deputies included)."""
    lines = [BEGIN, ""]
    for d in inventory(data_cache=True):
        lines += [
            f"**{_cell(d.identity)}** — {_cell(d.where)}. Runs: {_cell(d.runs)}. May: {_cell(d.may)}.",
            "",
            "| member-controlled field | reaches it as | bounded by |",
            "|---|---|---|",
            *(f"| `{_cell(f.field)}` | {_cell(f.reaches)} | {_cell(f.bound)} |" for f in d.fields),
            "",
        ]
    return "\n".join([*lines, END])


def updated(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + inventory_markdown() + text[end:]
