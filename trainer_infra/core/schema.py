"""Pydantic validation errors as ConfigIssues: the config path, what was expected, what was found, a hint."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from trainer_infra.core.errors import ConfigIssue, did_you_mean, format_path
from trainer_infra.core.types import PATTERN_HELP


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that owns the key at `loc`, so a typo can be matched against its real keys. Under a
    mapping-valued field (`quota: {<pool>: …}`) the next part is a user's key, not a field: skipped."""
    current: Any = model
    user_key = False
    for part in loc:
        if isinstance(part, int) or user_key:
            user_key = False
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        by_alias = {f.alias or n: f for n, f in current.model_fields.items()}
        fld = by_alias.get(part)
        if fld is None:
            return None
        user_key = _is_mapping(fld.annotation)
        current = _unwrap(fld.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _is_mapping(annotation: Any) -> bool:
    """dict[str, X] (also inside Optional/Annotated): its keys are the user's."""
    while True:
        origin = typing.get_origin(annotation)
        if origin in (dict, Mapping):
            return True
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is None or not args or origin is list:
            return False
        annotation = args[0]


def _unwrap(annotation: Any) -> Any:
    """Optional[X], list[X], dict[str, X], Annotated[X, ...] → X."""
    while True:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin is None or not args:
            return annotation
        annotation = args[-1] if origin in (dict, Mapping) else args[0]


def keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def issue_from(root: type[BaseModel], err: Mapping[str, Any]) -> ConfigIssue:
    """One pydantic error of a `root` model validation as a ConfigIssue."""
    loc = tuple(err["loc"])
    if loc and loc[-1] == "[key]":  # pydantic's marker for a problem with a mapping's key itself
        loc = loc[:-1]
        err = {**err, "msg": f"Value error, the key: {str(err['msg']).removeprefix('Value error, ')}"}
    path = format_path(loc)
    kind = err["type"]
    found = None if kind == "missing" else short(err.get("input"))
    if kind == "extra_forbidden":
        parent = model_at(root, loc[:-1])
        hint = did_you_mean(str(loc[-1]), keys_of(parent)) if parent else None
        if hint is None and parent is not None:
            hint = "allowed keys: " + ", ".join(keys_of(parent))
        return ConfigIssue(path, f"unknown key '{loc[-1]}'", None, hint)
    if kind == "missing":
        return ConfigIssue(path, "required key is missing", None, None)
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        what, hint = PATTERN_HELP.get(pattern, (f"a value matching {pattern}", None))
        return ConfigIssue(path, f"expected {what}", found, hint)
    message = str(err["msg"])
    if message.startswith("Value error, "):
        # A validator may add a hint after "; hint: ".
        text, _, hint = message.removeprefix("Value error, ").partition("; hint: ")
        return ConfigIssue(path, text, found, hint or None)
    if message.startswith("Input should be "):
        return ConfigIssue(path, "expected " + message.removeprefix("Input should be "), found, None)
    return ConfigIssue(path, message[:1].lower() + message[1:], found, None)
