"""The kinds judged in team namespaces, in policy order: those a team member's objects reach pods through (and
where each keeps its pod specs), then Services and what only the data cache creates."""

from __future__ import annotations

from trainer_infra.admission.cel import guarded
from trainer_infra.admission.model import AdmittedKind
from trainer_infra.core.registry import Registry
from trainer_infra.core.upstream import jobset, trainer
from trainer_infra.datacache import admission as datacache
from trainer_infra.manifests.pod_rules import PodSchema

_JOB_SPEC = guarded("j.template", "j.template.spec", "j.template.spec.template", "j.template.spec.template.spec")
_FROM_JOBS = f".filter(j, {_JOB_SPEC}).map(j, j.template.spec.template.spec)"

POD = AdmittedKind("Pod", "", "v1", "pods", ("CREATE",), specs="[[object.spec]]")
JOBSET = AdmittedKind(
    "JobSet",
    jobset.GROUP,
    "*",
    "jobsets",
    ("CREATE", "UPDATE"),
    specs=f"[object.spec.replicatedJobs{_FROM_JOBS}]",
    claim_templates="has(object.spec.volumeClaimPolicies) ? object.spec.volumeClaimPolicies : []",
)
TRAINING_RUNTIME = AdmittedKind(
    "TrainingRuntime",
    trainer.GROUP,
    "*",
    "trainingruntimes",
    ("CREATE", "UPDATE"),
    specs=(
        f"{guarded('object.spec.template', 'object.spec.template.spec', 'object.spec.template.spec.replicatedJobs')}"
        f" ? [object.spec.template.spec.replicatedJobs{_FROM_JOBS}] : []"
    ),
    claim_templates=(
        guarded("object.spec.template", "object.spec.template.spec", "object.spec.template.spec.volumeClaimPolicies")
        + " ? object.spec.template.spec.volumeClaimPolicies : []"
    ),
)
#: runtimePatches carry a narrower pod spec: no ephemeralContainers, no deprecated serviceAccount
TRAINJOB = AdmittedKind(
    "TrainJob",
    trainer.GROUP,
    "*",
    "trainjobs",
    ("CREATE", "UPDATE"),
    specs=(
        "has(object.spec.runtimePatches) ? object.spec.runtimePatches.filter(p, "
        + guarded(
            "p.trainingRuntimeSpec",
            "p.trainingRuntimeSpec.template",
            "p.trainingRuntimeSpec.template.spec",
            "p.trainingRuntimeSpec.template.spec.replicatedJobs",
        )
        + f").map(p, p.trainingRuntimeSpec.template.spec.replicatedJobs{_FROM_JOBS}) : []"
    ),
    pod=PodSchema(containers=("initContainers", "containers"), service_account_fields=("serviceAccountName",)),
)

#: no pods of its own (the data cache's head Service is one)
SERVICE = AdmittedKind("Service", "", "v1", "services", ("CREATE", "UPDATE"), specs=None)

KINDS: Registry[AdmittedKind] = Registry(
    POD, JOBSET, TRAINING_RUNTIME, TRAINJOB, datacache.LEADER_WORKER_SET, SERVICE, datacache.SERVICE_ACCOUNT
)
ALL = KINDS.names()
