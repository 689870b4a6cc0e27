"""Check PromQL used by the render (alerts, recording rules, dashboard panels) against real metrics.

`promql-names` (our wrapper around the pinned Prometheus parser, built like the other e2e binaries)
says which metric and label names each expression uses; this module compares them with what the
controllers' /metrics export, with the recorded series of our own rules, and with the documented
external exporters (trainer_infra/observability/sources.py).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.observability.sources import EXTERNAL, TARGET_LABELS, external_label_ok

Obj = dict[str, Any]

#: Grafana's built-in variables → a value PromQL accepts, so panel queries can be parsed as written.
GRAFANA_BUILTINS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def substitute_grafana(expr: str) -> str:
    """Built-ins by durations, template variables by a plain word (they only occur inside strings)."""
    for name, value in GRAFANA_BUILTINS.items():
        expr = expr.replace(name, value)
    return _VARIABLE.sub("x", expr)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"')


def parse_exposition(text: str) -> dict[str, set[str]]:
    """Prometheus text format → sample name → label names seen on it."""
    seen: dict[str, set[str]] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match:
            continue
        labels = seen.setdefault(match.group(1), set())
        labels.update(_LABEL.findall(match.group(3) or ""))
    return seen


def render_expressions(objects: list[Obj]) -> list[tuple[str, str]]:
    """(where, expr) for every rule of every PrometheusRule and every panel target of every dashboard ConfigMap;
    `where` is unique (alerts of the same name differ by group position)."""
    found: list[tuple[str, str]] = []
    for obj in objects:
        if obj["kind"] == "PrometheusRule":
            for group in obj["spec"]["groups"]:
                for i, rule in enumerate(group["rules"]):
                    name = rule.get("alert") or rule.get("record")
                    found.append(
                        (f"PrometheusRule {obj['metadata']['name']} {group['name']}[{i}] {name}", rule["expr"])
                    )
        elif obj["kind"] == "ConfigMap":
            for filename, text in (obj.get("data") or {}).items():
                if not filename.endswith(".json"):
                    continue
                board = json.loads(text)
                for panel in board.get("panels", []):
                    for target in panel.get("targets", []):
                        where = f"dashboard {board['uid']} panel {panel['title']!r} query {target['refId']}"
                        found.append((where, substitute_grafana(target["expr"])))
    return found


def recorded_series(objects: list[Obj], analyses: dict[str, Obj]) -> dict[str, set[str]]:
    """Recording rules' metric names → the labels their expressions produce (label_replace targets)."""
    recorded: dict[str, set[str]] = {}
    for obj in objects:
        if obj["kind"] != "PrometheusRule":
            continue
        for group in obj["spec"]["groups"]:
            for i, rule in enumerate(group["rules"]):
                if "record" in rule:
                    where = f"PrometheusRule {obj['metadata']['name']} {group['name']}[{i}] {rule['record']}"
                    recorded.setdefault(rule["record"], set()).update(analyses[where]["produced"])
    return recorded


def analyse(tool: Path, expressions: list[tuple[str, str]]) -> dict[str, Obj]:
    """Run promql-names over the expressions: where → {selectors, grouping, produced, error}."""
    payload = json.dumps([{"id": where, "expr": expr} for where, expr in expressions])
    proc = subprocess.run([str(tool)], input=payload, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"promql-names failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {item["id"]: item for item in json.loads(proc.stdout)}


@dataclass
class NameCheck:
    """Metric and label names the expressions use that nothing exports."""

    problems: list[str] = field(default_factory=list)
    used: dict[str, set[str]] = field(default_factory=dict)

    def report(self) -> str:
        return "\n".join(self.problems)


def check_names(analyses: dict[str, Obj], exported: dict[str, set[str]], recorded: dict[str, set[str]]) -> NameCheck:
    """Every selected metric must be exported (controllers), recorded (our rules) or documented external;
    every label it is matched, grouped or joined on must exist on it."""
    result = NameCheck()

    def labels_of(metric: str) -> set[str] | None:
        if metric in exported:
            return exported[metric] | set(TARGET_LABELS)
        if metric in recorded:
            return recorded[metric]
        return None

    def has_label(metric: str, label: str) -> bool:
        if metric in EXTERNAL:
            return external_label_ok(metric, label)
        known = labels_of(metric)
        return known is not None and label in known

    for where, item in sorted(analyses.items()):
        if item.get("error"):
            result.problems.append(f"{where}: does not parse: {item['error']}")
            continue
        produced = set(item.get("produced", []))
        for sel in item["selectors"]:
            metric = sel["metric"]
            result.used.setdefault(metric, set()).update(sel["labels"])
            if metric not in EXTERNAL and labels_of(metric) is None:
                result.problems.append(f"{where}: metric {metric} is not exported by any controller")
                continue
            for label in sel["labels"]:
                if not has_label(metric, label):
                    result.problems.append(f"{where}: metric {metric} has no label {label!r}")
        for grouping in item["grouping"]:
            metrics = grouping["metrics"]
            for label in grouping["labels"]:
                if label in produced or any(has_label(m, label) for m in metrics):
                    continue
                result.problems.append(f"{where}: label {label!r} (by/on/group) is on none of {metrics}")
    return result


def load_objects(manifests: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(manifests.read_text()) if d]
