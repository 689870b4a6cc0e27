"""The registered rules as one ValidatingAdmissionPolicy (+ Binding) per admitted kind."""

from __future__ import annotations

import json
from typing import Any

from trainer_infra.admission.cel import ANNOTATIONS, OBJECT_NAME, has_annotation
from trainer_infra.admission.model import ALLOW_LISTS, AdmissionRule, AdmissionSettings, TeamAdmission
from trainer_infra.core.upstream.kubernetes import ADMISSION_API as API
from trainer_infra.manifests import meta
from trainer_infra.manifests.pod_rules import DEFAULT_SERVICE_ACCOUNT
from trainer_infra.tenancy.admission.kinds import KINDS
from trainer_infra.tenancy.admission.registry import RULES

PREFIX = "trainer-platform-tenancy"


#: Placeholders a message may use: the team's own allow-lists, read from `variables.team`.
PLACEHOLDERS = {
    "{claims}": ("variables.team.claims.join(', ')", "the team's claims"),
    "{queues}": ("variables.team.queues.join(', ')", "the team's LocalQueues"),
    "{serviceAccounts}": ("variables.team.serviceAccounts.join(', ')", "the team's service accounts"),
}


def _validation(kind: str, expression: str, message: str, reason: str = "Forbidden") -> dict[str, Any]:
    """`message` is the static fallback; `messageExpression` names the object and fills the placeholders."""
    static = message
    parts = [json.dumps(f"{kind} "), OBJECT_NAME, json.dumps(" refused: ")]
    rest = message
    while True:
        found = [(rest.index(p), p) for p in PLACEHOLDERS if p in rest]
        if not found:
            parts.append(json.dumps(rest))
            break
        at, placeholder = min(found)
        parts += [json.dumps(rest[:at]), PLACEHOLDERS[placeholder][0]]
        rest = rest[at + len(placeholder) :]
        static = static.replace(placeholder, PLACEHOLDERS[placeholder][1])
    return {
        "expression": expression,
        "message": f"{kind} refused: {static}",
        "messageExpression": " + ".join(p for p in parts if p != '""'),
        "reason": reason,
    }


def namespace_annotations(team: TeamAdmission) -> dict[str, str]:
    """What the policies let this team reference, for its namespace's metadata."""
    lists = {
        "claims": set(team.claims),
        "queues": set(team.queues),
        "serviceAccounts": {DEFAULT_SERVICE_ACCOUNT, *team.service_accounts},
    }
    return {ALLOW_LISTS[key]: ",".join(sorted(names)) for key, names in lists.items()}


def _team_variable() -> str:
    """The allow-lists as lists of names; empty lists (nothing allowed) where an annotation is missing."""
    lists = {
        key: f"({has_annotation(ann)} ? {ANNOTATIONS}['{ann}'] : '').split(',').filter(n, n != '')"
        for key, ann in ALLOW_LISTS.items()
    }
    return "{" + ", ".join(f"'{key}': {expr}" for key, expr in lists.items()) + "}"


def _rules(kind: str) -> list[AdmissionRule]:
    unknown = sorted({k for rule in RULES for k in rule.kinds} - set(KINDS.names()))
    if unknown:
        raise ValueError(f"admission rules name kinds no policy judges: {unknown} (kinds.py lists {KINDS.names()})")
    podless = sorted({r.name for r in RULES if r.per_pod and any(KINDS[k].specs is None for k in r.kinds)})
    if podless:
        raise ValueError(f"per-pod admission rules name kinds without pod specs: {podless}")
    return [rule for rule in RULES if kind in rule.kinds]


def policy_validations(kind: str, settings: AdmissionSettings) -> list[dict[str, Any]]:
    """The ordered validations of one kind's policy (the unit tests evaluate exactly these)."""
    out = []
    for rule in _rules(kind):
        expression = rule.expression(KINDS[kind], settings)
        if expression is None:
            continue
        if rule.per_pod:
            expression = f"variables.specs.all(l, l.all(s, {expression}))"
        out.append(_validation(kind, expression, rule.message_in(settings), rule.reason))
    return out


def policy_variables(kind: str, settings: AdmissionSettings) -> list[dict[str, str]]:
    admitted = KINDS[kind]
    out = [{"name": "team", "expression": _team_variable()}]
    if admitted.specs is not None:
        out.append({"name": "specs", "expression": admitted.specs})
    if admitted.claim_templates is not None:
        out.append({"name": "claimTemplates", "expression": admitted.claim_templates})
    out += [{"name": name, "expression": expression} for name, expression in admitted.variables]
    return out


#: Updates that change neither spec nor labels (finalizers, annotations) are not judged again: an object
#: admitted before a rule existed must still be deletable by its controller.
CHANGED = (
    "request.operation != 'UPDATE' || object.spec != oldObject.spec || "
    "has(object.metadata.labels) != has(oldObject.metadata.labels) || "
    "(has(object.metadata.labels) && object.metadata.labels != oldObject.metadata.labels)"
)


def policy_name(kind: str) -> str:
    return f"{PREFIX}-{kind.lower()}s"


def admission_objects(settings: AdmissionSettings, team_label: str = meta.TEAM_LABEL) -> list[dict[str, Any]]:
    """One ValidatingAdmissionPolicy + Binding per admitted kind this stack has (`kinds.py`)."""
    if not settings.teams:
        return []
    out: list[dict[str, Any]] = []
    for kind in KINDS:
        if not kind.applies(settings):
            continue
        resource = (kind.group, kind.version, kind.resource, kind.operations)
        variables = policy_variables(kind.name, settings)
        validations = policy_validations(kind.name, settings)
        match = kind.match(settings) if kind.match is not None else ("spec-or-labels-changed", CHANGED)
        out += team_policy(policy_name(kind.name), resource, variables, validations, match, team_label)
    return out


def team_policy(
    name: str,
    resource: tuple[str, str, str, tuple[str, ...]],
    variables: list[dict[str, str]],
    validations: list[dict[str, Any]],
    match: tuple[str, str] = ("spec-or-labels-changed", CHANGED),
    team_label: str = meta.TEAM_LABEL,
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy on team namespaces and its Deny binding; `resource`: group, version,
    plural, operations; `match`: the one match condition (name, CEL)."""
    group, version, plural, operations = resource
    selector = {"matchExpressions": [{"key": team_label, "operator": "Exists"}]}
    policy = {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": meta.metadata(name),
        "spec": {
            "failurePolicy": "Fail",
            "matchConditions": [{"name": match[0], "expression": match[1]}],
            "matchConstraints": {
                "namespaceSelector": selector,
                "resourceRules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": [version],
                        "operations": list(operations),
                        "resources": [plural],
                    }
                ],
            },
            "variables": variables,
            "validations": validations,
        },
    }
    binding = {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": meta.metadata(name),
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": selector}},
    }
    return [policy, binding]
