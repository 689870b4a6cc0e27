"""The storage's admission rules, registered in `tenancy/admission/registry.py` like every other rule: they keep a
job's directory the job's: the runtime mounts the team claim at `storage.mountPath`
with `subPathExpr: jobs/$(TRAIN_JOB_NAME)`, and `TRAIN_JOB_NAME` is the pod's own JobSet-name label (downward
API; `storage/injection.py`). That label is the TrainJob's name (Trainer names the JobSet after it, JobSet
overwrites the label on every pod it creates: jobset 0.12.0 `labelAndAnnotateObject`; the controller-label rule
keeps members from setting it), unique in the namespace while the TrainJob exists.

What a member could otherwise steer the directory with, each refused where it enters with the field's path:
- `TRAIN_JOB_NAME` in `spec.trainer.env` (Trainer upserts it over the runtime's) or in a runtime patch's env;
- a runtime patch that mounts anything at the mount path (it would replace the job's mount by another
  directory of the claim);
and, as the backstop whatever the route, every JobSet, Pod and TrainingRuntime: `TRAIN_JOB_NAME` only ever from
that label, and at the mount path only the job's directory.

A member can still mount the claim (the volume `initializer`) elsewhere in a runtime patch, on purpose, to read
the team's other jobs: docs/data-scientists.md says what that gives and why it is the team's own.
"""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.storage.injection import JOB_NAME_ENV, JOB_NAME_FIELD, SUB_PATH, VOLUME


def _from_label(e: str) -> str:
    """CEL: env `e` is the job name exactly as the runtime injects it (the pod's JobSet-name label)."""
    return (
        f"(!has({e}.value) && has({e}.valueFrom) && has({e}.valueFrom.fieldRef) && "
        f"{e}.valueFrom.fieldRef.fieldPath == {lit(JOB_NAME_FIELD)})"
    )


def _env_ok(c: str) -> str:
    return f"(!has({c}.env) || {c}.env.all(e, e.name != '{JOB_NAME_ENV}' || {_from_label('e')}))"


def _job_name_env(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if settings.workspace is None:
        return None
    return " && ".join(f"(!has(s.{f}) || s.{f}.all(c, {_env_ok('c')}))" for f in kind.pod.containers)


JOB_NAME = AdmissionRule(
    "jobName",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    f"sets {JOB_NAME_ENV} in a container's env (of a TrainJob: runtimePatches[].…containers[].env): it names "
    f"the job's directory of the team claim (jobs/$({JOB_NAME_ENV})), and only the platform sets it, from the "
    "TrainJob's name. "
    "Remove it; read your job's name from it",
    _job_name_env,
    per_pod=True,
)


def _trainer_job_name(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if settings.workspace is None:
        return None
    t = "object.spec.trainer"
    return f"!has({t}) || !has({t}.env) || {t}.env.all(e, e.name != '{JOB_NAME_ENV}')"


TRAINER_JOB_NAME = AdmissionRule(
    "trainerJobName",
    ("TrainJob",),
    f"spec.trainer.env sets {JOB_NAME_ENV}: it names the job's directory of the team claim (jobs/$({JOB_NAME_ENV})) "
    "and only the platform sets it, from the TrainJob's name, so that no job writes into another's. Remove it",
    _trainer_job_name,
)


def _mounts_at(c: str, path: str) -> str:
    return f"{c}.volumeMounts.filter(m, m.mountPath == {lit(path)} || m.mountPath == {lit(path + '/')})"


def _job_directory_mount(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    path = settings.workspace
    if path is None:
        return None
    if kind.name == "TrainJob":
        # a runtime patch's mount at the mount path merges into the runtime's (by mountPath): only the claim volume
        # with no sub-path of its own keeps the job's directory (what `migrate` writes for a v1 job's claim mount)
        merged = f"m.name == '{VOLUME}' && !has(m.subPath) && !has(m.subPathExpr)"
        per = f"!has(c.volumeMounts) || {_mounts_at('c', path)}.all(m, {merged})"
    else:
        own = (
            f"m.name == '{VOLUME}' && !has(m.subPath) && has(m.subPathExpr) && m.subPathExpr == {lit(SUB_PATH)} && "
            f"has(c.env) && c.env.exists(e, e.name == '{JOB_NAME_ENV}')"
        )
        per = f"!has(c.volumeMounts) || {_mounts_at('c', path)}.all(m, {own})"
    return " && ".join(f"(!has(s.{f}) || s.{f}.all(c, {per}))" for f in kind.pod.containers)


def _mount_message(settings: AdmissionSettings) -> str:
    path = settings.workspace or "storage.mountPath"
    return (
        f"mounts something at {path} other than the job's own directory (the claim volume '{VOLUME}' with "
        f"subPathExpr {SUB_PATH}, {JOB_NAME_ENV} from the pod's JobSet-name label): {path} is where the platform "
        "mounts your TrainJob's directory, and $CHECKPOINT_DIR lives there. To read the team's other jobs, mount "
        f"the volume '{VOLUME}' at another path"
    )


JOB_DIRECTORY_MOUNT = AdmissionRule(
    "jobDirectoryMount",
    ("JobSet", "TrainingRuntime", "TrainJob"),
    _mount_message,
    _job_directory_mount,
    per_pod=True,
)
