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

from trainer_infra.stack.config import StackConfig

# What a user-chosen map key stands for, for every map whose values have fields (by dotted path, list
# items as `[]`). tests/test_docs.py keeps this in step with the models.
MAP_KEYS: dict[str, str] = {
    "teams[].quota": "pool",
    "runtimes.overrides": "runtime",
    "queues.placement.runtimes": "runtime",
}

HEADER = """\
# Configuration reference

<!-- Generated from the config models by `make docs` (`trainer-infra config-docs`); do not edit by hand.
     tests/test_docs.py fails when this file is stale. -->

Every key sits under the `trainer-platform:` namespace of `stacks/Pulumi.<stack>.yaml`; unknown keys are
errors. `<pool>` and `<runtime>` stand for a key you choose (a `nodePools[].name`, a runtime name);
`[]` marks a list item. Check a stack with
`.venv/bin/trainer-infra validate --stack <stack>`; `trainer-infra config-schema` prints the JSON Schema.
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
