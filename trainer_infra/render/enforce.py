"""The offline entry point: a render's three outputs (manifests, helm releases, resources.json) →
subjects → the same rules the policy pack runs in `pulumi preview`."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

from trainer_infra.core.objects import CHART_TYPE, ManagedObject
from trainer_infra.policy_rules.model import Subject, Violation
from trainer_infra.policy_rules.rules import check
from trainer_infra.render.output import Rendered

EXIT_POLICY = 3  # validate/render exit code when a mandatory rule is violated


def subjects(rendered: Rendered) -> list[Subject]:
    """One subject per Pulumi resource, with the inputs `pulumi up` would send and its protection
    as resources.json records it. Manifests are matched to their resource by the resource name the
    platform gives every object (ManagedObject.key)."""
    # A manifest is an object (`node-x`) or, for NodePatch resources, a patch of one (`nodepatch-x`).
    by_key: dict[str, dict[str, Any]] = {}
    for m in rendered.manifests:
        by_key[ManagedObject(m).key] = by_key[ManagedObject(m, patch=True).key] = m
    matched: set[int] = set()
    releases = {str(r["name"]): r for r in rendered.releases}
    out: list[Subject] = []
    for res in rendered.resources:
        rtype, name = str(res["type"]), str(res["name"])
        props: dict[str, Any]
        if rtype == CHART_TYPE:
            props = {k: v for k, v in releases.get(name, {}).items() if k != "name"}
        elif name in by_key and rtype.startswith("kubernetes:") and id(by_key[name]) not in matched:
            props = by_key[name]
            matched.add(id(props))
        else:
            props = dict(res.get("inputs") or {})
        out.append(Subject(rtype, name, props, bool(res.get("protect")), res.get("childPolicy") or {}))
    unmatched = sorted(ManagedObject(m).key for m in rendered.manifests if id(m) not in matched)
    if unmatched:  # a manifest without its resource would escape the rules: never silently
        raise ValueError(f"manifests without a matching resource: {unmatched}")
    return out


def check_rendered(rendered: Rendered, advisory: Iterable[str] = ()) -> list[Violation]:
    return check(subjects(rendered), advisory)


def report(violations: Sequence[Violation]) -> str:
    hard = sum(not v.advisory for v in violations)
    head = f"policy: {hard} violation(s), {len(violations) - hard} advisory"
    return "\n".join([head, *("  " + v.render().replace("\n", "\n  ") for v in violations)])


def enforce(rendered: Rendered, allow_data_loss: bool) -> int:
    """Run the policy on a render for the CLI: print findings to stderr; EXIT_POLICY on a violation.

    With `allowDataLoss: true` the stack has dropped protection on purpose (a teardown), so
    data-is-protected is reported as advisory instead of failing: the same switch that lifts the
    protection lifts its rule, and there is no separate bypass flag to forget."""
    violations = check_rendered(rendered, ["data-is-protected"] if allow_data_loss else [])
    if violations:
        print(report(violations), file=sys.stderr)
    return EXIT_POLICY if any(not v.advisory for v in violations) else 0
