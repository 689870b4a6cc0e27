"""The field walk: every node of a v1 job is looked up in the field table (`mapping`) and mapped, superseded,
reported or refused; a field without an entry is an unknown field (bad input). The types the converter reads
are checked before it reads them: input is hostile."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from trainer_infra.core.errors import did_you_mean, format_path
from trainer_infra.migrate.kinds import REPLICA_FIELDS, Kind, Role
from trainer_infra.migrate.mapping import ENTRIES, PREFIXES, Disposition, Entry, entry_at, is_empty
from trainer_infra.migrate.replicas import Replica
from trainer_infra.migrate.result import Conversion, Path

POD = "spec.{replicas}.*.template"
# The types of the fields the converter reads (checked before it reads them: input is hostile). Keys are
# patterns, or the last segment of a pattern inside a replica's pod template.
EXPECTED: dict[str, type] = {
    "metadata": dict,
    "metadata.labels": dict,
    "metadata.annotations": dict,
    "spec": dict,
    "spec.runPolicy.activeDeadlineSeconds": int,
    "spec.runPolicy.suspend": bool,
    "spec.runPolicy.managedBy": str,
    "spec.runPolicy.schedulingPolicy.queue": str,
    "spec.runPolicy.schedulingPolicy.priorityClass": str,
    "spec.mainContainer": str,
    "spec.{replicas}.*.replicas": int,
    "containers": list,
    "containers[]": dict,
    "initContainers": list,
    "volumes": list,
    "volumes[]": dict,
    "image": str,
    "name": str,
    "command": list,
    "args": list,
    "env": list,
    "resources": dict,
    "ports": list,
    "ports[]": dict,
    "volumeMounts": list,
    "securityContext": dict,
    "nodeSelector": dict,
    "tolerations": list,
    "serviceAccountName": str,
    "labels": dict,
    "annotations": dict,
    "replicas": int,
    "hostNetwork": bool,
    "hostPID": bool,
    "hostIPC": bool,
}
TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "true or false"}


def _is(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


def pattern_of(path: Path) -> str:
    """`spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image` →
    `spec.{replicas}.*.template.spec.containers[].image`."""
    out = ""
    for i, part in enumerate(path):
        if isinstance(part, int):
            out += "[]"
        elif i == 1 and path[0] == "spec" and part in REPLICA_FIELDS:
            out += ".{replicas}"
        elif i == 2 and path[0] == "spec" and path[1] in REPLICA_FIELDS:
            out += ".*"
        else:
            out += ("." if out else "") + str(part)
    return out


def diff(a: Any, b: Any, path: Path) -> list[Path]:
    """Paths under which `b` differs from `a` (dicts by key, lists by index)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted({*a, *b}, key=str) for p in diff(a.get(k), b.get(k), (*path, k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in diff(x, y, (*path, i))]
    return [] if a == b else [path]


def kept(entry: Entry, value: Any) -> bool:
    """Dropping `value` loses nothing: one of the entry's `keeps`, or empty where no default is declared."""
    if entry.keeps:
        return any(value == k and type(value) is type(k) for k in entry.keeps)
    return is_empty(value)


def classify(c: Conversion, kind: Kind, replicas: list[Replica], primary: Replica) -> None:
    for x in replicas:
        if x.role is Role.SAME:
            c.skip.add((*x.path, "template"))
            for p in diff(primary.spec.get("template"), x.spec.get("template"), (*x.path, "template")):
                c.lossy(p, f"differs from {primary.type}: v2 runs one pod template on every training node")
    walk(c, c.obj, (), kind)


def walk(c: Conversion, value: Any, path: Path, kind: Kind) -> None:
    """Depth first; stops at the field table's entries (an entry covers its subtree)."""
    if path in c.skip:
        return
    if path:
        pattern = pattern_of(path)
        expected = EXPECTED.get(pattern.rsplit(".", 1)[-1] if pattern.startswith(POD) else pattern)
        if pattern in PREFIXES or pattern.startswith(POD):
            expected = expected or (dict if pattern in PREFIXES and not pattern.endswith("[]") else None)
        if expected is not None and value is not None and not _is(value, expected):
            c.result.error(path, f"expected {TYPE_NAMES[expected]}, found {type(value).__name__} {value!r:.60}")
            return
        entry = entry_at(pattern, kind.kind)
        if entry is not None:
            decide(c, entry, path, value, kind)
            return
        if pattern not in PREFIXES:
            parent = format_path(path[:-1]) or "the object"
            hint = did_you_mean(
                str(path[-1]),
                [e.pattern.rsplit(".", 1)[-1] for e in ENTRIES if e.pattern.startswith(pattern_of(path[:-1]) + ".")],
            )
            c.result.error(path, f"unknown field of {parent} in {kind.label}", hint or "")
            return
    if isinstance(value, dict):
        for key in value:
            walk(c, value[key], (*path, str(key)), kind)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            walk(c, item, (*path, i), kind)


def decide(c: Conversion, entry: Entry, path: Path, value: Any, kind: Kind) -> None:
    d = entry.disposition
    if entry.pattern.endswith(".ports") and isinstance(value, list):
        for i, port in enumerate(value):
            default = (
                kind.port is not None
                and isinstance(port, dict)
                and (port.get("name"), port.get("containerPort")) == kind.port
            )
            if not default:
                c.lossy((*path, i), "only the framework's default port is superseded by the runtime's")
        if kind.port is not None and value:
            c.note(path, d, f"the framework's port {kind.port[0]}/{kind.port[1]}: the runtime sets its own")
        return
    if d is Disposition.OBSERVED:
        c.note(path, d, entry.why)
    elif d is Disposition.SUPERSEDED:
        if entry.keeps and not kept(entry, value):
            c.lossy(path, f"{value!r}: {entry.why}")
        else:
            c.note(path, d, f"superseded by {entry.target}" + (f": {entry.why}" if entry.why else ""))
    elif d is Disposition.LOSSY:
        if not kept(entry, value):
            c.lossy(path, entry.why)
    elif (
        d is Disposition.MAPPED
        and entry.since
        and not is_empty(value)
        and (Version(c.target.trainer_version) < Version(entry.since))
    ):
        c.lossy(path, f"{entry.why} (the stack runs Trainer {c.target.trainer_version})")
    # MAPPED fields are carried by build(); TENANCY fields by check_tenancy().


# --- tenancy ----------------------------------------------------------------------------------
