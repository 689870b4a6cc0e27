"""Admission rules that keep the team notebook's (`tenancy/notebook.py`) two privileges its own: its pod label, which
the NetworkPolicies let reach the API server, and its ServiceAccount, whose token the SDK inside uses.

A pod is the notebook's when it runs as the notebook's ServiceAccount, carries the label, and a ReplicaSet of the
notebook's Deployment created it (`NOTEBOOK_POD`): members create neither pods nor ReplicaSets, and every other pod of
a team namespace is a Job's (from a JobSet) or a data cache's (from a StatefulSet). The label is refused wherever a
member writes labels that reach pods (a TrainJob and its runtime patches, a TrainingRuntime's and a JobSet's pod
templates) and on every other pod; the ServiceAccount is not in the team's allow-list (`pods.py` adds it for the
notebook's pod only), so the service-account rule refuses it in every TrainJob, runtime and JobSet."""

from __future__ import annotations

from trainer_infra.admission.cel import guarded
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream import kubernetes
from trainer_infra.tenancy.notebook import NOTEBOOK, NOTEBOOK_LABEL


def _labelled(meta: str) -> str:
    """CEL: the metadata object `meta` (set) carries the notebook label."""
    return f"(has({meta}.labels) && '{NOTEBOOK_LABEL}' in {meta}.labels)"


def _clean(parent: str) -> str:
    """CEL: `parent.metadata` is unset or carries no notebook label."""
    return f"(!has({parent}.metadata) || !{_labelled(parent + '.metadata')})"


#: CEL: the Pod under admission is the notebook's (its ReplicaSet's, labelled, as the notebook's ServiceAccount)
NOTEBOOK_POD = (
    "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
    f"o.apiVersion == '{kubernetes.APPS_API}' && o.kind == 'ReplicaSet' && o.name.startsWith('{NOTEBOOK}-') && "
    "has(o.controller) && o.controller) && "
    f"has(object.spec.serviceAccountName) && object.spec.serviceAccountName == '{NOTEBOOK}' && "
    f"{_labelled('object.metadata')})"
)


def _jobs_clean(jobs: str) -> str:
    """CEL: no replicated job of the list `jobs` labels its Job or its pods as the notebook."""
    pods = guarded("j.template.spec", "j.template.spec.template")
    pod = _clean("j.template.spec.template")
    return f"{jobs}.all(j, !has(j.template) || ({_clean('j.template')} && (!({pods}) || {pod})))"


def _notebook_label(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if not settings.notebook:
        return None
    own = f"!{_labelled('object.metadata')}"
    if kind.name == "Pod":
        return f"{own} || {NOTEBOOK_POD}"
    if kind.name == "JobSet":
        return f"{own} && (!has(object.spec.replicatedJobs) || {_jobs_clean('object.spec.replicatedJobs')})"
    if kind.name == "TrainingRuntime":
        t = "object.spec.template"
        jobs = f"{t}.spec.replicatedJobs"
        return f"{own} && (!{guarded(t)} || ({_clean(t)} && (!({guarded(t + '.spec', jobs)}) || {_jobs_clean(jobs)})))"
    # a TrainJob: its own labels and every runtime patch's (Kueue's too: it copies no pod label of its own choosing)
    t = "p.trainingRuntimeSpec.template"
    jobs = f"{t}.spec.replicatedJobs"
    patch = (
        f"!({guarded('p.trainingRuntimeSpec', t)}) || ({_clean(t)} && "
        f"(!({guarded(t + '.spec', jobs)}) || {_jobs_clean(jobs)}))"
    )
    return f"{own} && (!has(object.spec.runtimePatches) || object.spec.runtimePatches.all(p, {patch}))"


NOTEBOOK_LABEL_RULE = AdmissionRule(
    "notebookLabel",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    f"sets the label {NOTEBOOK_LABEL} (on the object or a pod template): it marks the team notebook's pod, the one "
    "pod of the team the NetworkPolicies let reach the API server, and only the platform's notebook Deployment "
    "sets it. Remove it; submit from the team's notebook instead",
    _notebook_label,
)
