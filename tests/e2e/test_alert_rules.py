"""The platform's alert rules under the pinned `promtool test rules` (each alert fires when it should and stays
silent otherwise), its rule file and every dashboard query under `promtool check rules`. No cluster: their own
session (``run.py``'s ``TOOLS_TESTS``), once promtool is built, beside the real-node sessions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.promql import render_expressions
from tests.observability.fixtures import FACTS, SETTINGS, rules_file
from trainer_infra.observability.objects import dashboard_config_maps
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.versions import VersionSet

pytestmark = pytest.mark.e2e

ALERT_TESTS = Path(__file__).resolve().parents[1] / "observability" / "alerts_test.yaml"


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    promtool = Builder(VersionSet.from_env()).binary("promtool")
    return subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_alert_rules_fire_when_they_should_and_stay_silent_otherwise(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(rules_file(strip_annotations=True))
    shutil.copy(ALERT_TESTS, tmp_path / "alerts_test.yaml")
    proc = _promtool("test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    rules = yaml.safe_load(rules_file())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    cases = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    firing = {t["alertname"] for c in cases for t in c.get("alert_rule_test", []) if t.get("exp_alerts")}
    silent = {t["alertname"] for c in cases for t in c.get("alert_rule_test", []) if not t.get("exp_alerts")}
    assert alerts - firing == set(), "alerts never shown to fire"
    assert alerts - silent == set(), "alerts never shown to stay silent"


def test_rule_file_with_annotations_passes_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(rules_file())
    proc = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    """Panel queries (Grafana variables substituted) as recording rules: promtool parses each one."""
    rules = [
        {"record": f"panel:{i}", "expr": expr}
        for i, (_, expr) in enumerate(render_expressions(dashboard_config_maps(FACTS, SETTINGS)))
    ]
    assert len(rules) >= 20
    (tmp_path / "panels.yaml").write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    proc = _promtool("check", "rules", "panels.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
