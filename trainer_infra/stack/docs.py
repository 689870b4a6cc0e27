"""docs/configuration.md, generated from the config models so the reference cannot drift from the code.

One section per top-level key, one row per field. Keys of a map the user chooses (a pool name, a runtime
name) are written as `<pool>`, `<runtime>`, ... from MAP_KEYS (default `<name>`), so a reader sees
`teams[].quota.<pool>.gpus`, the path they type, not the field name of the value model.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from trainer_infra.nodepools.checks import MAX_FLAVORS
from trainer_infra.nodepools.kwok import MAX_KWOK_NODES
from trainer_infra.stack import file as stack_file
from trainer_infra.stack.config import MAX_TEAMS, StackConfig
from trainer_infra.teams.config import MAX_SUBJECTS

# What a user-chosen map key stands for, for every map whose values have fields (by dotted path, list
# items as `[]`). `make test` (test_docs) keeps this in step with the models.
MAP_KEYS: dict[str, str] = {
    "teams[].quota": "pool",
    "runtimes.overrides": "runtime",
    "queues.placement.runtimes": "runtime",
    "teams[].secrets.extra": "secret>.<key",  # a map of maps: secret name, then key
}

HEADER = f"""\
# Configuration reference

<!-- Generated from the config models by `make docs` (`trainer-infra config-docs`); do not edit by hand.
     `make test` fails when this file is stale. -->

Every key sits under the `trainer-platform:` namespace of `stacks/Pulumi.<stack>.yaml`; unknown keys are
errors. `<pool>` and `<runtime>` stand for a key you choose (a `nodePools[].name`, a runtime name);
`[]` marks a list item. Check a stack with
`.venv/bin/trainer-infra validate --stack <stack>`; `trainer-infra config-schema` prints the JSON Schema.

## Limits and what `validate` refuses

`validate`, `render` and `pulumi up` read a stack the same way and refuse it (exit 2, every problem at once,
each with its config path, what was expected, what was found and a hint) before any work grows with the
input. A value the API server or a pinned controller would refuse at `pulumi up` (a negative quota, an
int32 overflow, a taint repeated, a Secret key with a space, a LimitRange whose min exceeds its max, a Kueue
integration or feature gate its version does not know, an image reference a kubelet cannot pull, …) is
refused at the key that sets it.

| limit | value |
|---|---|
| stack file size | {stack_file.MAX_BYTES} bytes |
| YAML nesting depth | {stack_file.MAX_DEPTH} |
| YAML nodes after alias expansion | {stack_file.MAX_NODES} |
| teams | {MAX_TEAMS} |
| users, groups, service accounts per team | {MAX_SUBJECTS} each (one RoleBinding holds them) |
| kwok fake nodes per stack | {MAX_KWOK_NODES} (checked from `kwok.layout` before a node is generated) |
| node pools | {MAX_FLAVORS} (Kueue flavors per resource group) |

The file is strict UTF-8 (a BOM is fine) and one YAML document. A duplicate key is an error (YAML would keep
the last one silently); dates and `yes`/`no` stay strings, as the Pulumi CLI reads them; `!!binary`, `!!set`,
`!!omap`, `!!pairs`, `!!timestamp` and `.inf`/`.nan` are refused. A setting that has no effect in the stack
(placement or an override for a runtime it does not serve, `dataCache.cacheImage` with the cache off, a
`borrowingLimit` or `lendingLimit` of the only team in the cohort) is a warning naming it; a secret written
in plain text (`kubernetes.kubeconfig`, `teams[].secrets.*`) renders with a warning giving the command that
stores it encrypted:
`pulumi config set --secret --path 'trainer-platform:teams[0].secrets.hfToken' <value>`. Under `pulumi up`
the engine hands every value over decrypted and says only which top-level keys hold a secret, so the program
warns only where nothing under that key is encrypted; `validate` reads the file and names each one.
`render --out DIR` writes a fresh directory and moves it into place: a refused or failed render leaves DIR
as it was.
"""


def _strip_optional(annotation: Any) -> Any:
    """`X | None` → X (None only widens the default); other unions stay."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args if a is not type(None))
    if origin is list:
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return f"map[{_type_name(args[0])}, {_type_name(args[1])}]"
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if annotation is SecretStr:
        return "secret"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return ""  # its fields have rows of their own
    if isinstance(value, list):
        value = [v.model_dump(by_alias=True, exclude_defaults=True) if isinstance(v, BaseModel) else v for v in value]
    return f"`{json.dumps(value, default=str)}`"


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _text(doc: str) -> str:
    return " ".join(doc.split()).replace("|", "\\|")


def _value_type(annotation: Any) -> tuple[Any, str]:
    """The type below a field (a list's item, a map's value, or the field itself) and the field's shape."""
    shape = _strip_optional(annotation)
    origin = typing.get_origin(shape)
    if origin is list:
        return typing.get_args(shape)[0], "list"
    if origin is dict:
        return typing.get_args(shape)[1], "map"
    return shape, "field"


def _field_rows(key: str, field: FieldInfo) -> list[str]:
    value, shape = _value_type(field.annotation)
    nested = _models(value)
    doc = field.description or ""
    if not doc and nested:
        doc = (nested[0].__doc__ or "").strip().split("\n\n")[0]
    shown = f"{key}[]" if shape == "list" else key
    rows = [f"| `{shown}` | {_type_name(field.annotation)} | {_default(field)} | {_text(doc)} |"]
    for sub in nested:
        for name, child in sub.model_fields.items():
            rows += _field_rows(f"{_below(key, shape)}{child.alias or name}", child)
    return rows


def _below(key: str, shape: str) -> str:
    """The prefix of the keys under a field: `teams[].`, `teams[].quota.<pool>.`, `queues.`."""
    if shape == "list":
        return f"{key}[]."
    return f"{key}.<{MAP_KEYS.get(key, 'name')}>." if shape == "map" else f"{key}."


def map_paths(model: type[BaseModel] = StackConfig, prefix: str = "") -> list[str]:
    """Dotted paths (as MAP_KEYS writes them) of every map whose values are objects with fields of their own."""
    found = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"
        value, shape = _value_type(field.annotation)
        nested = _models(value)
        if shape == "map" and nested:
            found.append(key)
        for sub in nested:
            found += map_paths(sub, _below(key, shape))
    return found


def reference_markdown() -> str:
    """The whole of docs/configuration.md."""
    out = [HEADER]
    for name, field in StackConfig.model_fields.items():
        key = field.alias or name
        out += [f"## `{key}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        out += [*_field_rows(key, field), ""]
    return "\n".join(out).rstrip("\n") + "\n"
