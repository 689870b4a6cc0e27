"""The migration page's mapping table is generated from the converter's field table (`make docs`)."""

from __future__ import annotations

from tests.migrate.helpers import ROOT
from trainer_infra.migrate.docs import updated
from trainer_infra.migrate.mapping import ENTRIES

PAGE = ROOT / "docs" / "migrating-from-training-operator-v1.md"


def test_mapping_table_is_current() -> None:
    text = PAGE.read_text()
    assert updated(text) == text, f"{PAGE.name} is stale: run `make docs`"


def test_every_entry_has_a_row() -> None:
    text = PAGE.read_text()
    for e in ENTRIES:
        shown = e.pattern.replace("{replicas}", "<kind>ReplicaSpecs").replace(".*.", ".<type>.")
        assert f"| `{shown}` |" in text
