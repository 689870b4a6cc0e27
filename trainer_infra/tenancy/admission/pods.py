"""Admission rules on every pod spec `s` of an object: the CEL of each rule of `manifests/pod_rules.py`, the
one vocabulary of what a team's pods may carry (a new pod rule is added there, not here)."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream.lws import NAME_LABEL as LWS_NAME_LABEL
from trainer_infra.datacache.pinned import CACHE_SUFFIX
from trainer_infra.manifests.pod_rules import RULES as POD_RULES
from trainer_infra.manifests.pod_rules import Lists, PodRule


def _lists(kind: AdmittedKind, settings: AdmissionSettings) -> Lists:
    # a JobSet (and its pods) may also run as the data cache initializer, whose account only the platform's cache
    # runtime names; a cache cluster's pods run as their LeaderWorkerSet's own `<trainjob>-cache` account
    wide = kind.name in ("JobSet", "Pod") and settings.data_cache_service_account
    extra = [settings.data_cache_service_account] if wide else []
    lws = ""
    if kind.name == "Pod" and settings.data_cache_service_account:
        name = f"object.metadata.labels['{LWS_NAME_LABEL}']"
        labelled = f"has(object.metadata.labels) && '{LWS_NAME_LABEL}' in object.metadata.labels"
        own = f"{labelled} && {name}.endsWith('{CACHE_SUFFIX}')"
        lws = f" + ({own} ? [{name}] : [])"
    return Lists(
        claims="variables.team.claims",
        service_accounts=f"(variables.team.serviceAccounts + {lit(sorted(extra))}{lws})",
        priority_classes=lit(sorted(settings.priority_classes)),
    )


def _admission(rule: PodRule) -> AdmissionRule:
    def expression(kind: AdmittedKind, settings: AdmissionSettings) -> str:
        return rule.cel(kind.pod, _lists(kind, settings))

    return AdmissionRule(rule.name, rule.kinds, rule.message, expression, per_pod=True)


RULES: tuple[AdmissionRule, ...] = tuple(_admission(rule) for rule in POD_RULES)
