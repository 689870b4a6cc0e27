"""`make docs`: rewrite the README's generated configuration reference in place."""

from __future__ import annotations

from tests.helpers import ROOT
from trainer_infra.stack.docs import BEGIN, END, reference_markdown


def updated(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + reference_markdown().rstrip("\n") + text[end:]


if __name__ == "__main__":
    readme = ROOT / "README.md"
    readme.write_text(updated(readme.read_text()))
