"""Admission rule on a TrainJob's own env: the variables Trainer sets for its status server are Trainer's
(`manifests/pod_rules.py` STATUS_SERVER judges every pod spec; this is the one env outside a pod spec)."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream import trainer


def _trainer_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return (
        "!has(object.spec.trainer) || !has(object.spec.trainer.env) || "
        f"object.spec.trainer.env.all(e, !(e.name in {lit(list(trainer.STATUS_ENV))}))"
    )


TRAINER_STATUS_ENV = AdmissionRule(
    "trainerStatusEnv",
    ("TrainJob",),
    f"sets {', '.join(trainer.STATUS_ENV)} in spec.trainer.env: Trainer sets them (the status server's URL, its CA "
    "and the job's token) when progress is on, and a URL of your own would send the job's token elsewhere. "
    "Call update_trainjob_status() from your training script",
    _trainer_env,
)
