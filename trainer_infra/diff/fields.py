"""Field-level differences between two JSON-like values, with paths a reviewer can read.

Lists of mappings that all have a `name` (containers, env, replicatedJobs, flavors…) are matched by
name, so inserting one container does not show every later one as changed. A multi-line string that
parses as a YAML mapping on both sides (e.g. Kueue's `controllerManagerConfigYaml`) is compared as
data, not as one opaque string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<absent>"})()


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any  # MISSING when the field was added
    new: Any  # MISSING when the field was removed

    @property
    def op(self) -> str:
        return "added" if self.old is MISSING else "removed" if self.new is MISSING else "changed"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _named(items: list[Any]) -> dict[str, Any] | None:
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return None
    by_name = {i["name"]: i for i in items}
    return by_name if len(by_name) == len(items) else None


def _embedded_yaml(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str) or "\n" not in text:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def field_changes(old: Any, new: Any, path: str = "") -> list[FieldChange]:
    """Every leaf that differs between `old` and `new`, in a stable order."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[FieldChange] = []
        for key in sorted(set(old) | set(new), key=str):
            out += field_changes(old.get(key, MISSING), new.get(key, MISSING), _join(path, str(key)))
        return out
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _named(old), _named(new)
        if old_named is not None and new_named is not None:
            out = []
            for name in sorted(set(old_named) | set(new_named)):
                out += field_changes(old_named.get(name, MISSING), new_named.get(name, MISSING), f"{path}[{name}]")
            return out
        if len(old) == len(new):
            return [
                c for i, (a, b) in enumerate(zip(old, new, strict=True)) for c in field_changes(a, b, f"{path}[{i}]")
            ]
        return [FieldChange(path, old, new)]
    old_doc, new_doc = _embedded_yaml(old), _embedded_yaml(new)
    if old_doc is not None and new_doc is not None:
        return field_changes(old_doc, new_doc, f"{path}|yaml")
    return [FieldChange(path, old, new)]


def changed_under(changes: list[FieldChange], prefixes: tuple[str, ...]) -> list[FieldChange]:
    """The changes at or below any of `prefixes` (paths like `spec.levels`)."""
    return [
        c
        for c in changes
        if any(c.path == p or c.path.startswith(p + ".") or c.path.startswith(p + "[") for p in prefixes)
    ]
