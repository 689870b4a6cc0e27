"""Admission rule on every pod of a team namespace, whoever creates it: it runs charged, as part of a job Kueue
admitted, in the team's queue, or as a data cache cluster's pod (bounded by the data cache's own rules), or as the
team file service's pod (`storage/files.py`: a ReplicaSet of its Deployment, which only the platform creates:
members have no right on ReplicaSets or Deployments), or as the team's notebook (`tenancy/notebook.py`)."""

from __future__ import annotations

from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream.kueue import QUEUE_LABEL
from trainer_infra.datacache.pinned import CACHE_SUFFIX
from trainer_infra.storage import files
from trainer_infra.tenancy.admission.notebook import NOTEBOOK_POD


def _pod_queue(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if not settings.kueue_identity:
        return None

    def owned(api: str, kind: str) -> str:
        return (
            "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
            f"o.apiVersion == '{api}' && o.kind == '{kind}' && has(o.controller) && o.controller)"
        )

    label = f"object.metadata.labels['{QUEUE_LABEL}']"
    queued = (
        f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels && {label} in variables.team.queues"
    )
    allowed = f"({owned('batch/v1', 'Job')}) || ({queued})"
    if settings.data_cache:  # the cache cluster's pods (LWS → StatefulSet); dataCachePods pins their image
        sa = "(has(object.spec.serviceAccountName) ? object.spec.serviceAccountName : '')"
        allowed += f" || (({owned('apps/v1', 'StatefulSet')}) && {sa}.endsWith('{CACHE_SUFFIX}'))"
    if settings.file_server:
        (key, value), *_ = files.POD_LABELS.items()
        labels = "object.metadata.labels"
        labelled = f"has({labels}) && '{key}' in {labels} && {labels}['{key}'] == '{value}'"
        replica_set = (
            "o.apiVersion == 'apps/v1' && o.kind == 'ReplicaSet' && "
            f"o.name.startsWith('{files.NAME}-') && has(o.controller) && o.controller"
        )
        allowed += (
            f" || ({labelled} && has(object.metadata.ownerReferences) && "
            f"object.metadata.ownerReferences.exists(o, {replica_set}))"
        )
    if settings.notebook:  # the team's notebook: the platform's one pod, sized by the stack (teams[].notebook)
        allowed += f" || {NOTEBOOK_POD}"
    return allowed


def _pod_queue_message(settings: AdmissionSettings) -> str:
    notebook = " or the team's notebook" if settings.notebook else ""
    return (
        f"a pod in a team namespace runs only as part of a job (owned by a Job of a JobSet Kueue admitted) or with "
        f"the label {QUEUE_LABEL} naming your team's queue ({{queues}}), or as a data cache cluster's pod{notebook}: "
        "other pods would run without being charged"
    )


POD_QUEUE = AdmissionRule("podQueue", ("Pod",), _pod_queue_message, _pod_queue)
