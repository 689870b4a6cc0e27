"""Find every value of a type in a validated config, with the config location it came from, so a rule
that belongs to a type (a container's resources, a secret) runs wherever that type is used."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")
Loc = tuple[str | int, ...]


def instances(value: Any, kind: type[T], loc: Loc = ()) -> Iterator[tuple[Loc, T]]:
    """(location by config key, e.g. `("teams", 0, "secrets", "hfToken")`, value) for each `kind` inside."""
    if isinstance(value, kind):
        yield loc, value
    elif isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            yield from instances(getattr(value, name), kind, (*loc, info.alias or name))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from instances(item, kind, (*loc, str(key)))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from instances(item, kind, (*loc, i))
