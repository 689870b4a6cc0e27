"""`make docs`: regenerate docs/configuration.md from the config models."""

from __future__ import annotations

from pathlib import Path

from trainer_infra.stack.docs import reference_markdown

CONFIGURATION = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

if __name__ == "__main__":
    CONFIGURATION.write_text(reference_markdown())
    print(f"wrote {CONFIGURATION}")
