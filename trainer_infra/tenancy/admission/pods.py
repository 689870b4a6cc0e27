"""Admission rules on every pod spec `s` of an object: the CEL of each rule of `manifests/pod_rules.py`, the
one vocabulary of what a team's pods may carry (a new pod rule is added there, not here)."""

from __future__ import annotations

from trainer_infra.manifests.pod_rules import RULES as POD_RULES
from trainer_infra.manifests.pod_rules import Lists, PodRule
from trainer_infra.tenancy.admission.cel import lit
from trainer_infra.tenancy.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind


def _lists(kind: AdmittedKind, settings: AdmissionSettings) -> Lists:
    # a JobSet may also run as the data cache initializer, whose account only the platform's cache runtime names
    wide = kind.name == "JobSet" and settings.data_cache_service_account
    extra = [settings.data_cache_service_account] if wide else []
    return Lists(
        claims="variables.team.claims",
        service_accounts=f"(variables.team.serviceAccounts + {lit(sorted(extra))})",
        priority_classes=lit(sorted(settings.priority_classes)),
    )


def _admission(rule: PodRule) -> AdmissionRule:
    def expression(kind: AdmittedKind, settings: AdmissionSettings) -> str:
        return rule.cel(kind.pod, _lists(kind, settings))

    return AdmissionRule(rule.name, rule.kinds, rule.message, expression, per_pod=True)


RULES: tuple[AdmissionRule, ...] = tuple(_admission(rule) for rule in POD_RULES)
