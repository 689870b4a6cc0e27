"""Runtime injection: mount the team claim at `storage.mountPath` in every initializer and trainer job.

Runtimes are cluster-scoped but a claim is namespaced: every team namespace has a claim with the same
name, so one runtime resolves to the TrainJob's own team volume. The pod volume keeps the upstream
name `initializer` (the volume upstream runtimes and the SDK's initializers write to), now backed by
the team claim, so the dataset and the model are downloaded once and every training node reads them.

Existing mounts of that volume inside the mount path (upstream mounts it at /workspace/dataset and
/workspace/model) are folded into the one mount at /workspace: the same paths now resolve to the same
directories of the claim, and the dataset and model no longer share the claim's root.
"""

from __future__ import annotations

import copy
import posixpath
from typing import Any

from trainer_infra.manifests.runtime import is_step_job, pod_spec, replicated_jobs
from trainer_infra.storage.config import StorageConfig

VOLUME = "initializer"


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
    return [*kept, {"name": VOLUME, "mountPath": mount_path}]


def shared_workspace(storage: StorageConfig | None, runtime: dict[str, Any]) -> dict[str, Any]:
    if storage is None:
        return runtime
    out = copy.deepcopy(runtime)
    volume = {"name": VOLUME, "persistentVolumeClaim": {"claimName": storage.claim_name}}
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
        for container in spec.get("containers", []):
            container["volumeMounts"] = _mounts(container, storage.mount_path)
    return out
