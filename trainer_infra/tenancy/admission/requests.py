"""Admission rules on the request as a whole: the namespace is a team's, the TrainJob is in the team's queue,
only Kueue resumes a suspended job, per-job claims are new volumes, a runtime patch mounts the team claim through
the runtime's own volume."""

from __future__ import annotations

from trainer_infra.admission.cel import has_annotation, lit
from trainer_infra.admission.model import ALLOW_LISTS, AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream.kueue import QUEUE_LABEL
from trainer_infra.manifests.pod_rules import CLAIM_BINDING_FIELDS
from trainer_infra.storage.injection import VOLUME as CLAIM_VOLUME
from trainer_infra.tenancy.admission.kinds import ALL


def _known_team(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return " && ".join(f"({has_annotation(ann)})" for ann in ALLOW_LISTS.values())


KNOWN_TEAM = AdmissionRule(
    "knownTeam", ALL, "this namespace carries the team label but is not a team of this platform", _known_team
)


def _claim_templates(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if kind.claim_templates is None:
        return None
    binding = " || ".join(f"has(t.spec.{f})" for f in CLAIM_BINDING_FIELDS)
    return f"variables.claimTemplates.all(p, !has(p.templates) || p.templates.all(t, !has(t.spec) || !({binding})))"


CLAIM_TEMPLATES = AdmissionRule(
    "claimTemplates",
    ALL,
    f"a volumeClaimPolicies template sets {', '.join(CLAIM_BINDING_FIELDS)}: per-job claims must be new, "
    "empty volumes, not existing ones",
    _claim_templates,
)


def _patch_claim_volume(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if not any(team.claims for team in settings.teams):
        return None
    return f"!has(s.volumes) || s.volumes.all(v, !has(v.persistentVolumeClaim) || v.name == '{CLAIM_VOLUME}')"


PATCH_CLAIM_VOLUME = AdmissionRule(
    "patchClaimVolume",
    ("TrainJob",),
    f"a runtime patch mounts a claim as a new volume: the runtime already mounts your team's claim as the volume "
    f"'{CLAIM_VOLUME}', and the kubelet never mounts a second volume of one claim (kubernetes#132921), so the pod "
    f"would never start while the job holds its quota. Name the patch's volume '{CLAIM_VOLUME}' and mount that "
    "(subPath for a directory)",
    _patch_claim_volume,
    per_pod=True,
)


def _queue(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if not settings.kueue_identity:
        return None
    label = f"object.metadata.labels['{QUEUE_LABEL}']"
    return (
        f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels && {label} in variables.team.queues"
    )


QUEUE = AdmissionRule(
    "queue",
    ("TrainJob",),
    f"set the label {QUEUE_LABEL} to your team's queue ({{queues}}): jobs outside the queue would run without quota",
    _queue,
)


def _suspend(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    # the Trainer controller writes the JobSet of a TrainJob Kueue resumed
    candidates = (
        (settings.kueue_identity,) if kind.name == "TrainJob" else (settings.trainer_identity, settings.kueue_identity)
    )
    identities = [i for i in candidates if i]
    if kind.name == "TrainJob" and not identities:
        return None
    lifted = (
        "request.operation == 'UPDATE' && has(oldObject.spec.suspend) && oldObject.spec.suspend == true && "
        "!(has(object.spec.suspend) && object.spec.suspend == true)"
    )
    return f"!({lifted}) || request.userInfo.username in {lit(sorted(identities))}"


SUSPEND = AdmissionRule(
    "suspend",
    ("JobSet", "TrainJob"),
    "only the queue (Kueue) may resume a suspended job: it starts pods when quota is granted",
    _suspend,
)
