"""Registries: the declared way to add a backend, a component or a check.

An area lists its entries in one place (`nodepools/registry.py`, `storage/registry.py`,
`components/registry.py`): an entry is one module, registering it is one line. Entries are kept in the
order they are listed (install order, check order) and names must be unique, so two entries can never
silently shadow each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, create_model


class Named(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Named entries in listing order."""

    def __init__(self, *entries: T) -> None:
        self._entries: dict[str, T] = {}
        for entry in entries:
            if entry.name in self._entries:
                raise ValueError(f"two registry entries named {entry.name!r}")
            self._entries[entry.name] = entry

    def __iter__(self) -> Iterator[T]:
        return iter(self._entries.values())

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)


M = TypeVar("M", bound=BaseModel)


def model_with_settings(
    name: str, base: type[M], settings: dict[str, tuple[Any, Any]], doc: str | None = None
) -> type[M]:
    """`base` plus one field per registered entry (`{key: (annotation, default)}`), so a registered
    backend's settings block is validated, documented and reported with its path like any other field,
    and the models never list backends by hand."""
    model: type[M] = create_model(name, __base__=base, **settings)  # type: ignore[call-overload]
    model.__doc__ = doc or base.__doc__
    model.__module__ = base.__module__
    return model
