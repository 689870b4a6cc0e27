"""Errors a platform engineer can act on: where (config path), what was expected, what was found, a hint."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a stack config; `path` looks like `teams[2].quota.gpu`."""

    path: str
    message: str
    found: str | None = None
    hint: str | None = None

    def render(self) -> str:
        text = f"{self.path or '<root>'}: {self.message}"
        if self.found is not None:
            text += f" (found: {self.found})"
        if self.hint:
            text += f"\n    hint: {self.hint}"
        return text


class ConfigError(Exception):
    """Every issue of a config at once, so a user fixes them in one round."""

    def __init__(self, issues: Sequence[ConfigIssue], source: str = "") -> None:
        self.issues = tuple(issues)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        where = f" in {self.source}" if self.source else ""
        head = f"{len(self.issues)} error(s){where}:"
        return "\n".join([head, *("  " + i.render().replace("\n", "\n  ") for i in self.issues)])


def format_path(loc: Iterable[object]) -> str:
    """`("teams", 2, "quota", "gpu")` → `teams[2].quota.gpu`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    match = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else None
