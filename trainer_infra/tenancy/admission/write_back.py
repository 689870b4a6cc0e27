"""Refuse at submit what Kueue's write-back of an admitted TrainJob would drop.

Kueue 0.18/0.19 admits a TrainJob by writing the whole object back with `Update` from its Trainer Go types
(pkg/controller/jobs/trainjob, `RunWithPodSetsInfo`). Go's encoding drops what `omitempty` calls empty: `[]`,
`{}`, `""`, `false`, `0`. Trainer's CRD holds `spec.trainer`, `spec.initializer` and the patched pod fields
immutable (`self == oldSelf`), so the API server refuses that write. The job stays suspended while its workload
holds the queue's quota, borrowed capacity included, and nothing tells its owner why (kubeflow/trainer#3888;
kueue#14836 moves Kueue's main branch to a merge patch, in no release the matrix serves).

Quantities, which Go rewrites too (`4` → `"4"`), are canonical already: Kueue's mutating webhook wrote them so at
create (controller-runtime keeps a defaulter's replacements and drops its removals, which is also why the empty
values survive until admission). The fields come from `write_back.yaml`, generated from the Go types by
`make kueue-write-back`. The rules exist only where the stack's Kueue writes back (the matrix's
`trainJobFullUpdate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind

#: CEL: value `x` (a JSON value of that kind) survives Go's encoding unchanged
_KEEPS = {
    "collection": "size({x}) > 0",
    "string": "{x} != ''",
    "bool": "{x} != false",
    "number": "{x} != 0",
}
#: CEL reserved words a field name must be escaped from (Kubernetes: `__{word}__`)
_RESERVED = {"namespace", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import",
             "let", "loop", "package", "return", "var", "void", "while"}  # fmt: skip


@dataclass
class _Node:
    kind: str | None = None
    fields: dict[str, _Node] = field(default_factory=dict)
    items: _Node | None = None  # `[]`: every list item
    values: _Node | None = None  # `{}`: every map value


def _child(node: _Node, step: str) -> _Node:
    if step == "[]":
        node.items = node.items or _Node()
        return node.items
    if step == "{}":
        node.values = node.values or _Node()
        return node.values
    return node.fields.setdefault(step, _Node())


def _steps(path: str) -> list[str]:
    """`a.b[].c{}` → `a`, `b`, `[]`, `c`, `{}`."""
    out: list[str] = []
    for part in path.split("."):
        name = part.rstrip("[]{}")
        out.append(name)
        rest = part[len(name) :]
        out += [rest[i : i + 2] for i in range(0, len(rest), 2)]
    return out


def _cel(node: _Node, x: str, depth: int) -> str | None:
    """CEL: nothing under `x` changes in the write-back (None: nothing to check)."""
    checks = []
    if node.kind:
        checks.append(_KEEPS[node.kind].format(x=x))
    for name, child in sorted(node.fields.items()):
        ref = f"{x}.{f'__{name}__' if name in _RESERVED else name}"
        inner = _cel(child, ref, depth)
        if inner:
            checks.append(f"(!has({ref}) || ({inner}))")
    for each, member in (("e", node.items), ("k", node.values)):
        var = f"{each}{depth}"
        inner = _cel(member, var if each == "e" else f"{x}[{var}]", depth + 1) if member else None
        if inner:
            checks.append(f"{x}.all({var}, {inner})")
    return " && ".join(checks) or None


@cache
def write_back_data() -> dict[str, Any]:
    text = resources.files("trainer_infra.tenancy.admission").joinpath("write_back.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


@cache
def _tree() -> _Node:
    root = _Node()
    for kind, paths in write_back_data()["fields"].items():
        for path in paths:
            node = root
            for step in _steps(path):
                node = _child(node, step)
            node.kind = kind
    return root


def _dropped(kind: str, value: Any) -> bool:
    """Go's encoding drops `value` of a field of this kind (the CEL of `_KEEPS`, in Python)."""
    if kind == "collection":
        return value in ([], {})
    if kind == "bool":
        return value is False
    return not isinstance(value, bool) and value in (("",) if kind == "string" else (0,))


def prune(spec: dict[str, Any]) -> None:
    """Leave out of a TrainJob `spec`, in place, every value Kueue's write-back drops: a field left out means what
    its empty value means, so a converter loses nothing (`migrate`) and the rules admit the result."""

    def walk(value: Any, node: _Node) -> None:
        if isinstance(value, list) and node.items:
            for item in value:
                walk(item, node.items)
        if not isinstance(value, dict):
            return
        if node.values:
            for item in value.values():
                walk(item, node.values)
        for name, child in node.fields.items():
            if name in value:
                walk(value[name], child)  # inner first: a map it empties is dropped too
                if child.kind and _dropped(child.kind, value[name]):
                    del value[name]

    walk(spec, _tree())


#: one rule per part of the spec, so the message names where to look ("": the spec's other fields)
PARTS = {
    "trainer": "spec.trainer",
    "initializer": "spec.initializer",
    "runtimePatches": "spec.runtimePatches",
    "": "spec",
}


def _part(name: str) -> _Node:
    fields = _tree().fields
    if name:
        return _Node(fields={name: fields[name]}) if name in fields else _Node()
    return _Node(fields={k: v for k, v in fields.items() if k not in PARTS})


def _expression(part: str) -> Any:
    def expression(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
        return _cel(_part(part), "object.spec", 0) if settings.kueue_write_back else None

    return expression


def _message(where: str) -> str:
    return (
        f'{where} holds an empty list or map, an empty string, false or 0 (e.g. env: [], value: "", readOnly: '
        "false): leave the field out instead. Kueue drops such values when it writes the admitted TrainJob back, "
        f"Trainer refuses that change of the immutable {where}, and the job would stay suspended holding its queue's "
        "quota. With the kubeflow SDK, give a dataset initializer at least one option (e.g. ignore_patterns)"
    )


RULES = tuple(
    AdmissionRule(f"writeBack{part[:1].upper()}{part[1:] or 'Spec'}", ("TrainJob",), _message(where), _expression(part))
    for part, where in PARTS.items()
)
