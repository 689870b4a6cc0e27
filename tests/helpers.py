"""Shared test helpers: render a config through the real program, and check it against upstream truth."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.conformance import Conformance, Finding
from trainer_infra.core.cloud import placeholder_outputs
from trainer_infra.core.objects import Plan
from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import Rendered, assemble
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.load import raw_from_stack_document
from trainer_infra.stack.validate import Validated, validate

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


def plan_of(raw: dict[str, Any]) -> Plan:
    return build_plan(validate(raw))


def render(raw: dict[str, Any], stack: str = "test") -> Rendered:
    """The real program under mocks for `raw`, the way `trainer-infra render` runs it."""
    plan = plan_of(raw)
    return assemble(capture(lambda: deploy(plan), stack, placeholder_outputs(plan.resources)))


def crd_versions(validated: Validated) -> dict[str, str]:
    """The installed versions of the components whose CRDs the conformance harness checks against."""
    return {name: r.app_version for name, r in validated.releases.by_name.items() if r.crds}


def conformance_findings(raw: dict[str, Any], rendered: Rendered) -> list[Finding]:
    validated = validate(raw)
    checker = Conformance(validated.config.kubernetes.version, crd_versions(validated))
    return checker.check_all(rendered.manifests)


def resource(rendered: Rendered, name: str) -> dict[str, Any]:
    return next(r for r in rendered.resources if r["name"] == name)
