"""Admission rules on a TrainJob's runtime patches: they set no label or annotation the controllers own
(Trainer's step label decides which job, and which identity, runs a member's image), and an initializer job's
patch only places it (the initializers run the platform's image, the data cache's as its ServiceAccount:
`datacache/deputies.py` is the inventory they follow)."""

from __future__ import annotations

from trainer_infra.admission.cel import guarded, lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream import jobset, kubernetes, kueue, lws, trainer
from trainer_infra.datacache.deputies import INITIALIZER_JOBS

#: Label and annotation prefixes the controllers own: Trainer's step label decides which job gets a member's
#: image and which identity runs it; JobSet's, Kueue's and LWS's decide placement, queue and ownership.
CONTROLLER_PREFIXES = (f"{trainer.GROUP}/", jobset.LABEL_PREFIX, f"{kueue.GROUP}/", lws.LABEL_PREFIX)
#: Kueue's scheduling annotations a runtime patch may still set (topology requests stay within the quota).
KUEUE_ANNOTATIONS = (kueue.TOPOLOGY_ANNOTATIONS["preferred"], kueue.TOPOLOGY_ANNOTATIONS["required"])
APPARMOR_ANNOTATION = kubernetes.APPARMOR_CONTAINER_PREFIX

#: The manager of the runtime patch Kueue writes when it admits a TrainJob (Kueue's
#: pkg/controller/jobs/trainjob: `runtimePatchManagerName`): per podset its labels, annotations,
#: nodeSelector, tolerations and scheduling gates, initializer jobs included.
KUEUE_PATCH_MANAGER = kueue.PATCH_MANAGER


def _kueues_own(settings: AdmissionSettings) -> str:
    """CEL: patch `p` is Kueue's, written by Kueue itself (a member's patch under Kueue's name is judged)."""
    if not settings.kueue_identity:
        return "false"
    return (
        f"(has(p.manager) && p.manager == '{KUEUE_PATCH_MANAGER}' && "
        f"request.userInfo.username == '{settings.kueue_identity}')"
    )


def _patches_all(settings: AdmissionSettings, body: str) -> str:
    """CEL: `body` holds for every runtime patch `p` but the one Kueue writes."""
    return f"!has(object.spec.runtimePatches) || object.spec.runtimePatches.all(p, {_kueues_own(settings)} || {body})"


def _patch_jobs_all(settings: AdmissionSettings, body: str) -> str:
    """CEL: `body` holds for every replicated job patch `j` of every runtime patch but Kueue's."""
    p = "p.trainingRuntimeSpec"
    jobs = guarded(p, p + ".template", p + ".template.spec", p + ".template.spec.replicatedJobs")
    return _patches_all(settings, f"!({jobs}) || {p}.template.spec.replicatedJobs.all(j, {body})")


def _meta_ok(x: str) -> str:
    """CEL: `x.metadata` carries no controller label or annotation and no unconfined AppArmor annotation."""
    owned = " || ".join(f"k.startsWith('{p}')" for p in CONTROLLER_PREFIXES)
    labels = owned
    value = f"{x}.metadata.annotations[k]"
    confined = f"{value} == 'runtime/default' || {value}.startsWith('localhost/')"
    apparmor = f"(k.startsWith('{APPARMOR_ANNOTATION}') && !({confined}))"
    annotations = f"(({owned}) && !(k in {lit(list(KUEUE_ANNOTATIONS))})) || {apparmor}"
    return (
        f"(!has({x}.metadata) || ((!has({x}.metadata.labels) || !{x}.metadata.labels.exists(k, {labels})) && "
        f"(!has({x}.metadata.annotations) || !{x}.metadata.annotations.exists(k, {annotations}))))"
    )


def _controller_labels(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    t = "p.trainingRuntimeSpec.template"
    top = _patches_all(settings, f"!({guarded('p.trainingRuntimeSpec', t)}) || {_meta_ok(t)}")
    jobs = _patch_jobs_all(
        settings,
        f"!has(j.template) || ({_meta_ok('j.template')} && "
        f"(!{guarded('j.template.spec', 'j.template.spec.template')} || {_meta_ok('j.template.spec.template')}))",
    )
    return f"({top}) && ({jobs})"


CONTROLLER_LABELS = AdmissionRule(
    "controllerLabels",
    ("TrainJob",),
    "a runtime patch sets a label or annotation the controllers own "
    f"({', '.join(p + '*' for p in CONTROLLER_PREFIXES)}), or an unconfined AppArmor annotation: Trainer's step "
    "label decides which job (and which ServiceAccount) runs spec.trainer's image, the others decide queue, "
    "placement and ownership. Leave them to the runtime; set your own labels under your own prefix",
    _controller_labels,
)


def _initializer_patches(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    names = sorted({*INITIALIZER_JOBS, *(settings.data_cache.jobs if settings.data_cache else ())})
    forbidden = (
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "schedulingGates",
    )
    only = " && ".join(f"!has(j.template.spec.template.spec.{f})" for f in forbidden)
    body = (
        f"!(j.name in {lit(names)}) || !has(j.template) || (!has(j.template.metadata) && "
        "(!has(j.template.spec) || !has(j.template.spec.template) || (!has(j.template.spec.template.metadata) && "
        f"(!has(j.template.spec.template.spec) || ({only})))))"
    )
    return _patch_jobs_all(settings, body)


INITIALIZER_PATCHES = AdmissionRule(
    "initializerPatches",
    ("TrainJob",),
    "a runtime patch of an initializer job (dataset-initializer, model-initializer) may set nodeSelector, "
    "affinity and tolerations only: containers, env, volumes, mounts, securityContext, metadata or a "
    "ServiceAccount there would change what the platform's initializer (the data cache's: as its ServiceAccount) "
    "runs. Patch your trainer job (node) instead",
    _initializer_patches,
)
