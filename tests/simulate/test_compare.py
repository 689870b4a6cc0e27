"""`trainer-infra simulate-diff`: per team what a stack change did between two reports of the same trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainer_infra.cli import main
from trainer_infra.simulate.compare import render


def summary(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "complete": True,
        "stopped_early": None,
        "jobs": 20,
        "compression": 120,
        "trace_accelerator_seconds": 1000.0,
        "wall_seconds": 300.0,
        "utilisation": 0.8,
        "weighted_fairness": 0.9,
        "preemptions": 4,
        "preempted_accelerator_seconds": 7200.0,
        "waits": {"nlp": {"p50": 600.0, "p95": 3600.0}, "vision": {"p50": 60.0, "p95": 120.0}},
        "team_shares": {"nlp": 0.75, "vision": 0.25},
    }
    base.update(changes)
    return base


def test_per_team_wait_and_share_and_the_fleet() -> None:
    head = summary(
        utilisation=0.85,
        preemptions=1,
        waits={"nlp": {"p50": 300.0, "p95": 3600.0}, "vision": {"p50": 120.0, "p95": 240.0}},
        team_shares={"nlp": 0.7, "vision": 0.3},
    )
    text = render(summary(), head)
    lines = text.splitlines()
    assert lines[0] == "| team | p50 wait (min) | p95 wait (min) | share of the fleet |"
    assert lines[2] == "| nlp | 10 → 5 −5 | 60 → 60 ±0 | 75.0 % → 70.0 % −5.0 pt |"
    assert lines[3] == "| vision | 1 → 2 +1 | 2 → 4 +2 | 25.0 % → 30.0 % +5.0 pt |"
    assert "- utilisation: 0.800 → 0.850" in lines and "- preemptions: 4 → 1" in lines
    assert "- accelerator-hours thrown away by preemption: 2 → 2" in lines
    assert "Not comparable" not in text


def test_a_team_only_one_side_has_and_runs_that_are_not_comparable() -> None:
    head = summary(
        complete=False,
        stopped_early="the bound of 600 wall seconds was reached",
        jobs=21,
        waits={**summary()["waits"], "robotics": {"p50": 0.0, "p95": 60.0}},
    )
    text = render(summary(), head)
    assert "| robotics | – → 0 | – → 1 | – → – |" in text
    assert "**Not comparable as is:** the head run stopped early: the bound of 600 wall seconds" in text
    assert "**Not comparable as is:** the two runs replayed different traces" in text


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "summary.json").write_text(json.dumps(summary()))
    (tmp_path / "head.json").write_text(json.dumps(summary(utilisation=0.7)))
    assert main(["simulate-diff", str(tmp_path / "base"), str(tmp_path / "head.json")]) == 0
    assert "utilisation: 0.800 -> 0.700" in capsys.readouterr().out
    (tmp_path / "other.json").write_text(json.dumps(summary(compression=60)))
    assert main(["simulate-diff", str(tmp_path / "base"), str(tmp_path / "other.json"), "--format", "markdown"]) == 1
    (tmp_path / "junk.json").write_text("{}")
    assert main(["simulate-diff", str(tmp_path / "base"), str(tmp_path / "junk.json")]) == 2
    assert "not a simulate summary.json" in capsys.readouterr().err
