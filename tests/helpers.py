"""Shared test helpers: render a config through the real program, and check it against upstream truth."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.config.loader import LoadedConfig, raw_from_stack_document, validate_config
from trainer_infra.conformance import Conformance, Finding
from trainer_infra.program import run
from trainer_infra.render.capture import capture
from trainer_infra.render.output import Rendered, assemble

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "stacks"
MINIMAL: dict[str, Any] = {"kubernetes": {"version": "1.34"}}


def stack_raw(stack: str) -> dict[str, Any]:
    path = STACKS / f"Pulumi.{stack}.yaml"
    return raw_from_stack_document(yaml.safe_load(path.read_text()), str(path))


def with_changes(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(base)
    raw.update(changes)
    return raw


def render(raw: dict[str, Any], stack: str = "test") -> Rendered:
    return assemble(capture(lambda: run(validate_config(raw)), stack))


def conformance_findings(raw: dict[str, Any], rendered: Rendered) -> list[Finding]:
    loaded: LoadedConfig = validate_config(raw)
    cfg = loaded.config
    checker = Conformance(cfg.kubernetes.version, cfg.components.resolved_versions())
    return checker.check_all(rendered.manifests)


def resource(rendered: Rendered, name: str) -> dict[str, Any]:
    return next(r for r in rendered.resources if r["name"] == name)
