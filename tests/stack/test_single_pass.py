"""`validate` and `render` work the stack out once: one validation, one plan, one catalog load. The CLI hands
the validated plan to the program; nothing goes back through Pulumi config strings to be parsed again."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

import pytest

from trainer_infra import cli
from trainer_infra.catalog.loader import load_catalog
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate


def _calls(argv: list[str]) -> dict[str, int]:
    """How often each function ran, counted by its code object, whatever name it was imported under."""
    profile = cProfile.Profile()
    profile.enable()
    code = cli.main(argv)
    profile.disable()
    assert code == 0
    counts: dict[str, int] = {}
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    watched = {fn.__code__: fn.__name__ for fn in (validate, build_plan, load_catalog)}
    for (file, line, name), (_, calls, *_) in stats.items():
        for code_obj, label in watched.items():
            if (file, line, name) == (code_obj.co_filename, code_obj.co_firstlineno, code_obj.co_name):
                counts[label] = counts.get(label, 0) + calls
    return counts


@pytest.mark.parametrize("command", ["validate", "render"])
def test_validate_plan_and_catalog_run_once(command: str, tmp_path: Path) -> None:
    argv = [command, "--stack", "local"] + (["--out", str(tmp_path)] if command == "render" else [])
    assert _calls(argv) == {"validate": 1, "build_plan": 1, "load_catalog": 1}
