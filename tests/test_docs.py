"""The docs a reader relies on stay true: the generated reference is current, links resolve, the README stays
short, and what the docs list (injection order, commands) is what the code has."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.update_docs import CONFIGURATION
from trainer_infra.catalog.injections import INJECTIONS
from trainer_infra.cli import parser
from trainer_infra.stack.docs import MAP_KEYS, map_paths, reference_markdown

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_configuration_reference_is_current() -> None:
    assert CONFIGURATION.read_text() == reference_markdown(), "docs/configuration.md is stale: run `make docs`"


def test_reference_shows_the_paths_users_type() -> None:
    text = reference_markdown()
    # A map's values are documented under the key the user chooses, never as fields of the map itself.
    assert "| `teams[].quota.<pool>.gpus` |" in text and "`teams[].quota.gpus`" not in text
    assert "| `nodePools[].taints[].key` |" in text  # an optional list is still a list
    assert set(map_paths()) == set(MAP_KEYS), "name the key of every map of objects in MAP_KEYS (and only those)"


def test_reference_tables_render() -> None:
    """A `|` inside a cell (a Literal's choices) must be escaped, or the table row splits into more columns."""
    rows = [line for line in reference_markdown().splitlines() if line.startswith("| `")]
    assert rows
    bad = [r for r in rows if len(re.split(r"(?<!\\)\|", r)) != 6]
    assert not bad, bad[:3]


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= 250, f"README.md has {lines} lines; move reference material into docs/"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in page.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and dest.suffix == ".md" and dest.exists() and anchor not in _anchors(dest)
        if not dest.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_readme_links_every_docs_page() -> None:
    text = README.read_text()
    missing = [p.name for p in PAGES if f"docs/{p.name}" not in text]
    assert not missing, f"README does not point to {missing}"


def test_documented_injection_order_is_the_code_order() -> None:
    text = (ROOT / "docs" / "runtimes.md").read_text()
    section = text.split("## What the platform adds", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\d+\. `([a-z-]+)`", section, flags=re.M)
    assert documented == [name for name, _ in INJECTIONS]


def _commands(pattern: str) -> list[tuple[str, list[str]]]:
    found = []
    for page in [README, *PAGES]:
        for line in page.read_text().splitlines():
            for match in re.finditer(pattern + r" ([^`|#>]*)", line):
                argv = shlex.split(match.group(1).strip())
                if argv and not argv[0].startswith("<"):
                    found.append((f"{page.name}: {match.group(0)}", argv))
    return found


def test_documented_cli_commands_parse() -> None:
    """Commands shown to be run (`.venv/bin/trainer-infra …`, `python -m trainer_infra …`) parse as written."""
    commands = _commands(r"(?:\.venv/bin/trainer-infra|python -m trainer_infra)")
    assert len(commands) > 5
    bad = []
    for where, argv in commands:
        try:
            parser().parse_args(argv)
        except SystemExit:
            bad.append(where)
    assert not bad, bad


def test_documented_subcommands_exist() -> None:
    sub = next(a for a in parser()._actions if a.dest == "command")
    named = {argv[0] for _, argv in _commands(r"trainer-infra")}
    assert named and named <= set(sub.choices or {}), named - set(sub.choices or {})


def test_documented_make_targets_exist() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))
    shown = {t for p in [README, *PAGES] for t in re.findall(r"(?:^|`)make ([a-z][\w-]*)", p.read_text(), re.M)}
    assert shown and shown <= targets, shown - targets


def test_config_schema_describes_the_stack_config() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trainer_infra", "config-schema"], capture_output=True, text=True, check=True
    ).stdout
    schema = json.loads(out)
    assert schema["required"] == ["kubernetes"]
    assert schema["additionalProperties"] is False
    assert {"kubernetes", "components", "images", "charts", "allowUnsupportedVersions"} <= set(schema["properties"])
