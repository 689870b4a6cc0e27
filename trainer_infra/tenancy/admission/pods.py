"""Admission rules on every pod spec `s` of an object: the CEL of each rule of `manifests/pod_rules.py`, the
one vocabulary of what a team's pods may carry (a new pod rule is added there, not here)."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream import jobset, trainer
from trainer_infra.core.upstream.lws import NAME_LABEL as LWS_NAME_LABEL
from trainer_infra.datacache.pinned import CACHE_SUFFIX
from trainer_infra.manifests.pod_rules import RULES as POD_RULES
from trainer_infra.manifests.pod_rules import Lists, PodRule, StatusInjection
from trainer_infra.tenancy.admission.notebook import NOTEBOOK_POD
from trainer_infra.tenancy.notebook import NOTEBOOK

#: sentinels for the CEL expressions inside Trainer's status names (one home for their format: core/upstream)
_NS, _JOB = "\x00ns\x00", "\x00job\x00"


def _cel_text(text: str, job: str) -> str:
    """CEL concatenation of `text` with the request's namespace and `job` (a CEL expression) for the sentinels."""
    parts = []
    for i, piece in enumerate(text.split(_NS)):
        if i:
            parts.append("request.namespace")
        for j, bit in enumerate(piece.split(_JOB)):
            if j:
                parts.append(job)
            if bit:
                parts.append(lit(bit))
    return "(" + " + ".join(parts) + ")"


def status_injection(kind: AdmittedKind, settings: AdmissionSettings) -> StatusInjection | None:
    """What the pods of one TrainJob may carry for Trainer's status server: Trainer injects it into the JobSet it
    names after the TrainJob (pkg/runtime/framework/plugins/jobset/jobset.go Build), whose pods carry that name as
    JobSet's label. Objects members write (TrainJobs, runtimes) get nothing: Trainer adds it after them."""
    if settings.status_server_url is None or kind.name not in ("Pod", "JobSet"):
        return None
    if kind.name == "JobSet":
        job = "object.metadata.name"
    else:
        labelled = f"has(object.metadata.labels) && '{jobset.JOBSET_NAME_LABEL}' in object.metadata.labels"
        job = f"({labelled} ? object.metadata.labels['{jobset.JOBSET_NAME_LABEL}'] : '')"
    env = trainer.status_env(settings.status_server_url, _NS, _JOB)
    return StatusInjection(
        audience=_cel_text(trainer.status_audience(_NS, _JOB), job),
        config_map=_cel_text(_JOB + trainer.STATUS_CONFIG_MAP_SUFFIX, job),
        env={name: _cel_text(value, job) for name, value in env.items()},
    )


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
    notebook = f" + ({NOTEBOOK_POD} ? [{lit(NOTEBOOK)}] : [])" if kind.name == "Pod" and settings.notebook else ""
    return Lists(
        claims="variables.team.claims",
        service_accounts=f"(variables.team.serviceAccounts + {lit(sorted(extra))}{lws}{notebook})",
        priority_classes=lit(sorted(settings.priority_classes)),
        status=status_injection(kind, settings),
    )


def _admission(rule: PodRule) -> AdmissionRule:
    def expression(kind: AdmittedKind, settings: AdmissionSettings) -> str:
        return rule.cel(kind.pod, _lists(kind, settings))

    return AdmissionRule(rule.name, rule.kinds, rule.message, expression, per_pod=True)


RULES: tuple[AdmissionRule, ...] = tuple(_admission(rule) for rule in POD_RULES)
