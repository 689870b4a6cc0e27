"""Nothing silently dropped, part 2: a v1 job carrying any one field of the upstream schema (a value built
from the schema itself) converts with that value in the TrainJob, or is reported naming the field's path
(reported, refused, superseded, observed, or a bad-input error). Every replica type of every kind."""

from __future__ import annotations

import copy
import itertools
from functools import cache
from typing import Any

import pytest

from tests.migrate.helpers import job, options_for, run
from tests.migrate.schema_paths import fields
from tests.migrate.upstream import schemas
from trainer_infra.migrate.fields import kept
from trainer_infra.migrate.kinds import KINDS, Kind, Role
from trainer_infra.migrate.mapping import BY_PATTERN, Disposition, Entry, entry_at

META_VALUES: dict[str, Any] = {
    "labels": {"team": "nlp"},
    "annotations": {"example.com/note": "x"},
    "generateName": "train-",
    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u"}],
    "finalizers": ["example.com/keep"],
    "uid": "u",
    "resourceVersion": "7",
    "generation": 3,
    "creationTimestamp": "2026-01-01T00:00:00Z",
    "deletionTimestamp": "2026-01-01T00:00:00Z",
    "deletionGracePeriodSeconds": 30,
    "managedFields": [{"manager": "kubectl"}],
    "selfLink": "/x",
}
ENUMS = {"operator": "Exists", "effect": "NoSchedule", "whenUnsatisfiable": "DoNotSchedule", "type": "RuntimeDefault"}
STRUCTURAL = {
    "apiVersion",
    "kind",
    "metadata.name",
    "metadata.namespace",
    "spec.{replicas}",
    "spec.{replicas}.*.template.spec.containers[].name",
    "spec.{replicas}.*.template.spec.containers[].image",
}


def synth(schema: dict[str, Any], depth: int = 0) -> Any:
    """A value of the schema's type that is not a default: the last enum value, 3, True, one property."""
    if schema.get("enum"):
        return schema["enum"][-1]
    if schema.get("x-kubernetes-int-or-string"):
        return "3"
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind == "integer":
        return 3
    if kind == "number":
        return 1.5
    if kind == "string":
        return "2026-01-01T00:00:00Z" if schema.get("format") == "date-time" else "value-3"
    if kind == "array":
        return [synth(schema.get("items") or {}, depth + 1)]
    props: dict[str, Any] = schema.get("properties") or {}
    if props and depth < 8:
        keys = schema.get("required") or [sorted(props)[0]]
        # Kubernetes validates these enums in Go, not in the CRD schema; the Trainer API models check them.
        return {k: ENUMS.get(k) or synth(props[k], depth + 1) for k in keys}
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        return {"key": synth(additional, depth + 1)}
    return {"key": "value"}


def not_kept(entry: Entry | None, value: Any) -> Any:
    """Prefer a value whose loss would matter (False where the default is True)."""
    if entry is not None and kept(entry, value) and isinstance(value, bool):
        return not value
    return value


def concrete(pattern: str, kind: Kind, replica: str) -> list[str | int]:
    out: list[str | int] = []
    for part in pattern.replace("[]", ".[]").split("."):
        if part == "{replicas}":
            out.append(kind.replicas_field)
        elif part == "*":
            out.append(replica)
        elif part == "[]":
            out.append(0)
        elif part:
            out.append(part)
    return out


def put(obj: dict[str, Any], path: list[str | int], value: Any) -> None:
    node: Any = obj
    for key, nxt in itertools.pairwise(path):
        if isinstance(node, list):
            node = node[key]  # type: ignore[index]
            continue
        if key not in node or not isinstance(node[key], (dict, list)):
            node[key] = [] if isinstance(nxt, int) else {}
        if isinstance(node[key], list) and isinstance(nxt, int) and not node[key]:
            node[key].append({})
        node = node[key]
    node[path[-1]] = value


def with_replica(obj: dict[str, Any], kind: Kind, replica: str) -> None:
    """Make sure the job has `replica`: a second leader type replaces the first (TFJob Master for Chief),
    any other type is added as a copy of the first replica spec."""
    specs = obj["spec"][kind.replicas_field]
    if replica in specs:
        return
    leaders = [t for t, r in kind.roles if r is Role.TRAINER]
    present = [t for t in specs if t in leaders]
    if kind.role(replica) is Role.TRAINER and present:
        specs[replica] = specs.pop(present[0])
    else:
        specs[replica] = copy.deepcopy(next(iter(specs.values())))


def contains(haystack: Any, needle: Any) -> bool:
    if (
        isinstance(needle, dict)
        and isinstance(haystack, dict)
        and needle
        and all(k in haystack and haystack[k] == v for k, v in needle.items())
    ):
        return True
    if haystack == needle:
        return True
    children = haystack.values() if isinstance(haystack, dict) else haystack if isinstance(haystack, list) else []
    return any(contains(c, needle) for c in children)


def fmt(path: list[str | int]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else ("." if out else "") + p
    return out


def cases() -> list[tuple[str, str, str, str]]:
    out: list[tuple[str, str, str, str]] = []
    for (api_version, kind_name), schema in sorted(schemas().items()):
        kind = next(k for k in KINDS if k.api_version == api_version and k.kind == kind_name)
        for pattern, _ in fields(schema):
            if pattern in STRUCTURAL or entry_at(pattern, kind_name) is None:
                continue  # below an entry (covered by it) or structural
            replicas = [t for t, _ in kind.roles] if pattern.startswith("spec.{replicas}.*") else [""]
            out.extend((api_version, kind_name, pattern, r) for r in replicas)
    return out


@cache
def _by_pattern(key: tuple[str, str]) -> dict[str, dict[str, Any]]:
    return dict(fields(schemas()[key]))


@pytest.mark.parametrize(("api_version", "kind_name", "pattern", "replica"), cases())
def test_field_is_mapped_or_reported(api_version: str, kind_name: str, pattern: str, replica: str) -> None:
    kind = next(k for k in KINDS if k.api_version == api_version and k.kind == kind_name)
    entry = entry_at(pattern, kind_name)
    obj = job(api_version, kind_name)
    if pattern.startswith("metadata."):
        value = META_VALUES[pattern.split(".", 1)[1]]
    else:
        value = not_kept(entry, synth(_by_pattern((api_version, kind_name)).get(pattern, {})))
    if replica:
        with_replica(obj, kind, replica)
    path = concrete(pattern, kind, replica)
    put(obj, path, copy.deepcopy(value))
    where = fmt(path)
    result = run(obj)
    reported = [f.path for f in result.findings] + [e.path for e in result.errors]
    if any(p.startswith(where) or where.startswith(p + ".") for p in reported if p):
        return
    assert entry is not None
    if kept(entry, value) and entry.disposition is not Disposition.MAPPED:
        return  # the value is the default v2 applies: nothing lost
    assert entry.disposition is Disposition.MAPPED, f"{where} = {value!r}: neither mapped nor reported"
    if result.trainjob is None:  # other fields were reported (e.g. MPI workers now differ): allow them
        result = run(obj, options=options_for(kind_name, allow_lossy=("spec", "metadata")))
    assert result.trainjob is not None, [*result.errors, *result.findings]
    if entry.target == "spec.trainer.numNodes":
        counted = [t for t, r in kind.roles if r is Role.NODES] or [
            t for t, r in kind.roles if r in (Role.TRAINER, Role.SAME)
        ]
        specs = obj["spec"][kind.replicas_field]
        assert result.trainjob["spec"]["trainer"]["numNodes"] == sum(
            specs[t].get("replicas", 1) for t in counted if t in specs
        )
        return
    assert contains(result.trainjob, value), f"{where} = {value!r} is not in the TrainJob: {result.trainjob}"


def test_every_entry_is_exercised() -> None:
    seen = {c[2] for c in cases()} | {f"metadata.{k}" for k in META_VALUES} | STRUCTURAL
    assert sorted(set(BY_PATTERN) - seen) == []
