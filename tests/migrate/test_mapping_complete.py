"""Nothing silently dropped, part 1: every field of every v1 job kind (read from the upstream CRD schemas)
has an entry in the field table, or sits under one; and every entry names a field that exists."""

from __future__ import annotations

import pytest

from tests.migrate.schema_paths import fields
from tests.migrate.upstream import MPI_OPERATOR, schemas
from trainer_infra.migrate.kinds import KINDS, find_kind
from trainer_infra.migrate.mapping import ENTRIES, PREFIXES, entry_at


def covering(pattern: str, kind: str) -> str | None:
    """The entry at or above `pattern` for `kind`, by pattern."""
    parts = pattern
    while parts:
        if entry_at(parts, kind) is not None:
            return parts
        cut = parts.rfind(".")
        bracket = parts.rfind("[]")
        parts = parts[: max(cut, bracket if bracket == len(parts) - 2 else -1)] if max(cut, bracket) > 0 else ""
    return None


def test_every_converted_kind_has_an_upstream_schema() -> None:
    have = set(schemas())
    want = {(k.api_version, k.kind) for k in KINDS}
    if ("kubeflow.org/v2beta1", "MPIJob") not in have:
        pytest.skip(f"no Go toolchain to download {MPI_OPERATOR[0]} {MPI_OPERATOR[1]}")
    assert want <= have


@pytest.mark.parametrize("key", sorted(schemas()), ids=lambda k: f"{k[1]}-{k[0].split('/')[1]}")
def test_every_v1_field_has_an_entry(key: tuple[str, str]) -> None:
    kind = find_kind(*key)
    assert kind is not None, f"{key} is served upstream but the converter does not read it"
    uncovered = sorted(
        pattern
        for pattern, _ in fields(schemas()[key])
        if covering(pattern, kind.kind) is None and pattern not in PREFIXES
    )
    assert uncovered == [], f"{kind.label}: fields without a decision in trainer_infra/migrate/mapping.py"


def test_every_entry_names_an_upstream_field() -> None:
    """An entry for a field no kind has is stale (or misspelt, and so silently never matches)."""
    if ("kubeflow.org/v2beta1", "MPIJob") not in schemas():
        pytest.skip(f"no Go toolchain to download {MPI_OPERATOR[0]} {MPI_OPERATOR[1]}")
    known: dict[str, set[str]] = {}
    for (_api_version, kind_name), schema in schemas().items():
        for pattern, _ in fields(schema):
            known.setdefault(pattern, set()).add(kind_name)
    stale = [e.pattern for e in ENTRIES if e.pattern not in known]
    wrong_kind = [(e.pattern, k) for e in ENTRIES for k in e.kinds if k not in known.get(e.pattern, set())]
    assert stale == [] and wrong_kind == []
