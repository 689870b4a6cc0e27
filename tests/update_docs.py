"""`make docs`: regenerate docs/configuration.md from the config models and the migration page's mapping
table from the converter's field table, and the deputy inventory of docs/teams.md."""

from __future__ import annotations

from pathlib import Path

from trainer_infra.datacache import docs as deputies_docs
from trainer_infra.migrate import docs as migrate_docs
from trainer_infra.stack.docs import reference_markdown

CONFIGURATION = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
MIGRATING = CONFIGURATION.parent / "migrating-from-training-operator-v1.md"
TEAMS = CONFIGURATION.parent / "teams.md"

if __name__ == "__main__":
    CONFIGURATION.write_text(reference_markdown())
    print(f"wrote {CONFIGURATION}")
    MIGRATING.write_text(migrate_docs.updated(MIGRATING.read_text()))
    print(f"wrote {MIGRATING}")
    TEAMS.write_text(deputies_docs.updated(TEAMS.read_text()))
    print(f"wrote {TEAMS}")
