"""Runtime injection: every initializer and trainer job sees its TrainJob's own directory of the team claim
at `storage.mountPath` (default /workspace), i.e. `<claim>/jobs/<trainjob>/`.

The mount path is one fact. Catalog files write the claim as `/workspace` (RUNTIME_WORKSPACE): their mounts of
the claim volume there, and the paths under it in those containers' command, args and env, follow
`storage.mountPath`. What the upstream initializer images write is fixed in the images (kubeflow/trainer
pkg/initializers/utils/utils.py: /workspace/dataset and /workspace/model, no setting), and the kubeflow SDK's
BuiltinTrainer passes /workspace/dataset paths to torchtune: runtimes running those images are served only with
the default mount path (`fixed_workspace`).

Runtimes are cluster-scoped but a claim is namespaced: every team namespace has a claim with the same name,
so one runtime resolves to the TrainJob's own team volume. The pod volume keeps the upstream name
`initializer` (the volume upstream runtimes and the SDK's initializers write to), now backed by the team claim.

Per-TrainJob isolation: upstream initializers write to fixed paths (/workspace/dataset, /workspace/model) and
torchtune to /workspace/output, so two TrainJobs of a team on the bare claim would overwrite each other. The
mount takes `subPathExpr: jobs/$(TRAIN_JOB_NAME)`, with `TRAIN_JOB_NAME` from the pod label
`jobset.sigs.k8s.io/jobset-name` through the downward API: Trainer names the JobSet after the TrainJob and
JobSet puts that label on every pod (upstream's own cache runtime reads the TrainJob name the same way).
Kubelet expands the variable from the container's env and refuses absolute or `..` results, so a job never
leaves the claim; a member's TRAIN_JOB_NAME (`trainer.env`, a runtime patch) or mount at the mount path is refused
at submit (`storage/admission.py`), so no job lands in another's directory. A restarted JobSet
and a re-created TrainJob of the same name find their directory again: checkpoints go to `$CHECKPOINT_DIR`
(= /workspace/checkpoints) for resume.

Existing mounts of that volume inside the mount path (upstream mounts it at /workspace/dataset and
/workspace/model) are folded into the one mount: the same paths now resolve inside the job's directory.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

from trainer_infra.manifests.pod_walk import MAIN_LISTS, containers
from trainer_infra.manifests.runtime import (
    JOBSET_NAME_LABEL,
    get_in,
    is_step_job,
    is_training,
    pod_spec,
    replicated_jobs,
)
from trainer_infra.storage.config import StorageConfig

VOLUME = "initializer"
RUNTIME_WORKSPACE = "/workspace"  # where catalog files (and upstream's) mount the claim volume
# The upstream initializer images, which download to RUNTIME_WORKSPACE/{dataset,model} whatever the mount.
FIXED_WORKSPACE_IMAGES = re.compile(r"(^|/)kubeflow/trainer/(dataset|model)-initializer([:@]|$)")
_UNDER_WORKSPACE = re.compile(r"(?<![\w./-])/workspace(?=/|$|[\s:;,])")
JOB_NAME_ENV = "TRAIN_JOB_NAME"
JOBS_DIR = "jobs"
SUB_PATH = f"{JOBS_DIR}/$({JOB_NAME_ENV})"
CHECKPOINT_ENV = "CHECKPOINT_DIR"
JOB_NAME_FIELD = f"metadata.labels['{JOBSET_NAME_LABEL}']"


def job_name_env() -> dict[str, Any]:
    return {"name": JOB_NAME_ENV, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": JOB_NAME_FIELD}}}


def _inside(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mounts(container: dict[str, Any], mount_path: str) -> list[dict[str, Any]]:
    kept = [
        m
        for m in container.get("volumeMounts", [])
        if posixpath.normpath(m["mountPath"]) != posixpath.normpath(mount_path)
        and not (m["name"] == VOLUME and not m.get("subPath") and _inside(m["mountPath"], mount_path))
    ]
    return [*kept, {"name": VOLUME, "mountPath": mount_path, "subPathExpr": SUB_PATH}]


def _relocated(container: dict[str, Any], mount_path: str) -> None:
    """The file's mounts of the claim volume at or under RUNTIME_WORKSPACE, and the paths under it in command,
    args and env values, moved to `mount_path` (in place)."""
    mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") == VOLUME]
    if mount_path == RUNTIME_WORKSPACE or not any(_inside(m["mountPath"], RUNTIME_WORKSPACE) for m in mounts):
        return
    for m in mounts:
        if _inside(m["mountPath"], RUNTIME_WORKSPACE):
            m["mountPath"] = mount_path + posixpath.normpath(m["mountPath"])[len(RUNTIME_WORKSPACE) :]
    for key in ("command", "args"):
        if isinstance(container.get(key), list):
            container[key] = [_UNDER_WORKSPACE.sub(mount_path, a) if isinstance(a, str) else a for a in container[key]]
    for env in container.get("env") or []:
        if isinstance(env.get("value"), str):
            env["value"] = _UNDER_WORKSPACE.sub(mount_path, env["value"])


def fixed_workspace(runtime: Mapping[str, Any]) -> list[str]:
    """job/container of every container that mounts the claim volume and runs an upstream initializer image:
    they write to RUNTIME_WORKSPACE whatever the mount path."""
    return [
        f"{job.get('name')}/{c.get('name')}"
        for job in replicated_jobs(runtime)
        for _, c in containers(get_in(job, "template", "spec", "template", "spec") or {})
        if FIXED_WORKSPACE_IMAGES.search(str(c.get("image", "")))
        and any(m.get("name") == VOLUME for m in c.get("volumeMounts") or [])
    ]


def _with_env(container: dict[str, Any], env: dict[str, Any]) -> None:
    """Add an env var unless the container defines that name already (the check below compares them)."""
    existing = container.setdefault("env", [])
    if not any(e.get("name") == env["name"] for e in existing):
        existing.append(env)


def shared_workspace(storage: StorageConfig | None, runtime: dict[str, Any]) -> dict[str, Any]:
    if storage is None:
        return runtime
    out = copy.deepcopy(runtime)
    volume = {"name": VOLUME, "persistentVolumeClaim": {"claimName": storage.claim_name}}
    checkpoints = {"name": CHECKPOINT_ENV, "value": posixpath.join(storage.mount_path, "checkpoints")}
    for job in replicated_jobs(out):
        if not is_step_job(job):
            continue
        spec = pod_spec(job)
        volumes = spec.setdefault("volumes", [])
        at = next((i for i, v in enumerate(volumes) if v.get("name") == VOLUME), None)
        if at is None:
            volumes.append(dict(volume))
        else:
            volumes[at] = dict(volume)
        for _, container in containers(spec, MAIN_LISTS):
            _relocated(container, storage.mount_path)
            container["volumeMounts"] = _mounts(container, storage.mount_path)
            _with_env(container, job_name_env())
            if is_training(job) or job.get("name") == "launcher":
                _with_env(container, dict(checkpoints))
    return out


def _env_source(container: Mapping[str, Any], name: str) -> str:
    for e in container.get("env") or []:
        if e.get("name") == name:
            ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            return f"fieldRef {ref}" if ref else f"value {e.get('value')!r}"
    return "unset"


def workspace_views(runtime: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(job/container, how it sees the claim) for every container that mounts the claim volume."""
    for job in replicated_jobs(runtime):
        for _, c in containers(get_in(job, "template", "spec", "template", "spec") or {}):
            for m in c.get("volumeMounts") or []:
                if m.get("name") != VOLUME:
                    continue
                sub = m.get("subPathExpr") or m.get("subPath") or "<claim root>"
                view = f"{m.get('mountPath')} → {sub}"
                if "$(" + JOB_NAME_ENV + ")" in sub:
                    view += f" ({JOB_NAME_ENV}: {_env_source(c, JOB_NAME_ENV)})"
                yield f"{job.get('name')}/{c.get('name')}", view


def workspace_disagreement(runtime: Mapping[str, Any]) -> str | None:
    """Why initializers and trainer of this runtime would not see the same job directory, or None. Every
    container mounting the claim must mount it at one path with one sub-path expression, and that expression
    must resolve to the TrainJob's own directory (a mount of the claim root elsewhere would expose every job)."""
    views = sorted(set(workspace_views(runtime)))
    distinct = {v for _, v in views}
    expected = f"({JOB_NAME_ENV}: fieldRef {JOB_NAME_FIELD})"
    if len(distinct) <= 1 and all(v.endswith(expected) for v in distinct):
        return None
    return "initializers and trainer must see the same job directory; found " + "; ".join(
        f"{where}: {view}" for where, view in views
    )
