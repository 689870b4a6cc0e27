"""A StackDiff as text (terminal) or Markdown (PR comment). Deterministic: same diff, same bytes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from trainer_infra.diff.compare import DataRisk, StackDiff
from trainer_infra.diff.fields import MISSING, FieldChange

MAX_VALUE = 100
MAX_COMMENT = 60_000  # GitHub refuses comments over 65,536 characters
SYMBOL = {"added": "+", "removed": "-", "changed": "~"}


def value_text(value: Any) -> str:
    if value is MISSING:
        return "(absent)"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    text = text.replace("\n", "⏎")
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def _counts(diff: StackDiff) -> str:
    def n(items: Sequence[Any], op: str) -> int:
        return sum(1 for i in items if i.op == op)

    parts = [
        f"objects: {n(diff.objects, 'added')} added, {n(diff.objects, 'changed')} changed, "
        f"{n(diff.objects, 'removed')} removed",
        f"Helm releases: {len(diff.releases)} changed",
        f"other resources: {len(diff.resources)} changed",
    ]
    return "; ".join(parts)


def _risk_line(r: DataRisk) -> str:
    return f"{r.action.upper()} {r.label}: {r.reason}"


# --- text -----------------------------------------------------------------------------------------


def _text_fields(fields: Sequence[FieldChange], indent: str = "      ") -> list[str]:
    return [f"{indent}{f.path}: {value_text(f.old)} -> {value_text(f.new)}" for f in fields]


def text(diff: StackDiff, title: str) -> str:
    lines = [title]
    if not diff.changed:
        return "\n".join([*lines, "no changes"]) + "\n"
    if diff.risks:
        lines += ["", "!!! PROTECTED RESOURCES: deleted, replaced or unprotected !!!"]
        lines += [f"  !! {_risk_line(r)}" for r in diff.risks]
    lines += ["", _counts(diff)]
    if diff.releases:
        lines += ["", "Helm releases:"]
        for rel in diff.releases:
            version = f" {rel.old_version} -> {rel.new_version}" if rel.old_version != rel.new_version else ""
            lines.append(f"  {SYMBOL[rel.op]} {rel.name}{version}")
            lines += _text_fields(rel.fields)
    for title_, items in (("Objects:", diff.objects), ("Other resources:", diff.resources)):
        if items:
            lines += ["", title_]
            for item in items:
                lines.append(f"  {SYMBOL[item.op]} {item.label}")
                lines += _text_fields(item.fields)
    return "\n".join(lines) + "\n"


# --- markdown -------------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    inner = value_text(value).replace("|", "\\|").replace("`", "'")
    return f"`{inner}`" if value is not MISSING else "*(absent)*"


def _md_table(fields: Sequence[FieldChange]) -> list[str]:
    rows = ["| field | before | after |", "|---|---|---|"]
    rows += [f"| `{f.path}` | {_cell(f.old)} | {_cell(f.new)} |" for f in fields]
    return rows


def _md_details(summary: str, fields: Sequence[FieldChange]) -> list[str]:
    if not fields:
        return [f"- {summary}"]
    n = len(fields)
    return [
        f"<details><summary>{summary} — {n} field{'s' if n > 1 else ''}</summary>",
        "",
        *_md_table(fields),
        "",
        "</details>",
        "",
    ]


def _md_object(summary: str, manifest: dict[str, Any]) -> list[str]:
    body = yaml.safe_dump(manifest, sort_keys=True, default_flow_style=False).rstrip("\n")
    return [f"<details><summary>{summary}</summary>", "", "```yaml", body, "```", "", "</details>", ""]


def markdown(diff: StackDiff, title: str, limit: int = MAX_COMMENT) -> str:
    """Fits a GitHub comment (65,536 characters): first without the bodies of added objects, then cut."""
    full = _markdown(diff, title, bodies=True)
    if len(full) <= limit:
        return full
    short = _markdown(diff, title, bodies=False)
    if len(short) <= limit:
        return short
    note = "\n\n*(truncated: run `trainer-infra diff` locally for the whole diff)*\n"
    return short[: limit - len(note)] + note


def _markdown(diff: StackDiff, title: str, bodies: bool) -> str:
    lines = [f"### {title}", ""]
    if not diff.changed:
        return "\n".join([*lines, "No changes."]) + "\n"
    if diff.risks:
        lines += [
            "> [!CAUTION]",
            "> **Protected resources would be deleted, replaced or unprotected.** These hold user work "
            "(CRDs → every object of their kind; team namespaces and PVCs → jobs and data).",
            ">",
            *(f"> - **{r.action}** `{r.label}`: {r.reason}" for r in diff.risks),
            "",
        ]
    lines += [f"**Summary:** {_counts(diff)}", ""]
    if diff.releases:
        lines += ["#### Helm releases", "", "| release | change | version |", "|---|---|---|"]
        for rel in diff.releases:
            version = (
                f"`{rel.old_version}` → `{rel.new_version}`"
                if rel.old_version != rel.new_version
                else f"`{rel.new_version}`"
            )
            if rel.op != "changed":
                version = f"`{rel.new_version or rel.old_version}`"
            lines.append(f"| `{rel.name}` | {rel.op} | {version} |")
        lines.append("")
        for rel in diff.releases:
            if rel.fields:
                lines += _md_details(f"<code>{rel.name}</code> chart and values", rel.fields)
    for heading, items in (("Objects", diff.objects), ("Other resources (Pulumi graph)", diff.resources)):
        if not items:
            continue
        lines += [f"#### {heading}", ""]
        for op in ("added", "removed", "changed"):
            for item in (i for i in items if i.op == op):
                added = getattr(item, "added", None)
                if added is not None and bodies:
                    lines += _md_object(f"{op} <code>{item.label}</code>", added)
                else:
                    lines += _md_details(f"{op} <code>{item.label}</code>", item.fields)
        if lines[-1]:
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
