"""CrossGuard entry point of the trainer-platform rules.

Adapts what the engine hands a policy (`ResourceValidationArgs` / `StackValidationArgs`: type, name,
props, opts.protect) to the pure rules in `trainer_infra/policy_rules/`, the same rules
`trainer-infra validate`/`render` run offline. Nothing rule-specific lives here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: trainer_infra/

import pulumi_policy.policy as _policy_module
from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY

from trainer_infra.policy_rules import RULES, SECRET_MARK, Rule, Subject

PACK_NAME = "trainer-platform"
_deserialize: Callable[..., dict[str, Any]] = _policy_module.deserialize_properties


def _mark_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SPECIAL_SIG_KEY) == SPECIAL_SECRET_SIG:
            return SECRET_MARK
        return {k: _mark_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_secrets(v) for v in value]
    return value


def deserialize_marking_secrets(props: dict[str, Any], proxy_secrets: bool = False) -> dict[str, Any]:
    """pulumi_policy unwraps secrets into plain values before a rule sees them, so "is this Secret's
    data a Pulumi secret?" could not be answered. Secrets become SECRET_MARK, as in the offline render."""
    return _deserialize(_mark_secrets(props), proxy_secrets)


_policy_module.deserialize_properties = deserialize_marking_secrets  # type: ignore[assignment]


def _plain(value: Any) -> Any:
    """The SDK's proxies → plain dicts/lists. Reading an unknown value (preview, before apply) raises
    the SDK's UnknownValueError, which it reports as 'cannot run during preview' (advisory)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(value[k]) for k in value}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(value[i]) for i in range(len(value))]
    return value


def subject(resource: Any) -> Subject:
    """ResourceValidationArgs or PolicyResource → Subject."""
    return Subject(resource.resource_type, resource.name, _plain(resource.props), bool(resource.opts.protect))


def _message(path: str, message: str, rule: Rule) -> str:
    return f"{path + ': ' if path else ''}{message} (hint: {rule.hint})"


def resource_policy(rule: Rule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for s, path, message in rule.fn([subject(args)]):
            report(f"{s.label}: {_message(path, message, rule)}", None)

    return ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validate)


def stack_policy(rule: Rule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        subjects = [subject(r) for r in args.resources]
        urns = {id(s): r.urn for s, r in zip(subjects, args.resources, strict=True)}
        for s, path, message in rule.fn(subjects):
            report(f"{s.label}: {_message(path, message, rule)}", urns[id(s)])

    return StackValidationPolicy(name=rule.name, description=rule.description, validate=validate)


def policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    return [resource_policy(r) if r.scope == "resource" else stack_policy(r) for r in RULES]


if __name__ == "__main__":
    PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=policies())  # type: ignore[arg-type]
