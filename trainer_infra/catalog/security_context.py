"""Injection `pod-security`: the pods of every runtime pass Pod Security `restricted`, by default, for
every team (`runtimes.securityContext`).

Runtimes are cluster-wide, so one securityContext serves every team: a `restricted` team needs it, a
`baseline` team loses nothing (no catalog image needs root to train). What a kubelet does with it decides
the details (kubelet-level effects are not verifiable in the kwok sandbox; see docs/teams.md):
- the upstream images (pytorch, torchtune, jax, xgboost, the initializers) declare no USER, i.e. root, and
  `runAsNonRoot: true` alone makes kubelet refuse to start them ("image will run as root"): an explicit
  non-root `runAsUser`/`runAsGroup` is set;
- that uid has no passwd entry, so HOME would be `/`: HOME points at an emptyDir, where the SDK's
  `pip install --user` (kubeflow SDK get_script_for_python_packages) and the Hugging Face caches write;
- the SDK writes the training function and `pip_install.log` into the working directory, the images'
  WORKDIR /workspace (root-owned in the image): a trainer container that mounts nothing at /workspace
  gets an emptyDir there; with `storage` the TrainJob's directory of the team claim is mounted there;
- `fsGroup` (the group again, `OnRootMismatch`) makes per-TrainJob claims and, where the CSI driver
  applies fsGroup (csi-driver-nfs: `fsGroupPolicy: File`), the team claim group-writable.
MPI runtimes keep their own user (mpiuser, uid 1000, whose HOME holds sshd's config and the plugin's ssh keys: no
HOME, no fsGroup, which would make the private key group-readable and ssh refuse it) and get the rest of
`restricted`; their sshd containers add back NET_BIND_SERVICE, the file capability upstream's images give sshd,
without which the kernel refuses to execute it under `drop: [ALL]` (docs/teams.md#pod-security).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import PositiveQuantity
from trainer_infra.manifests.pod_rules import ALLOWED_CAPABILITIES
from trainer_infra.manifests.pod_security_standards import restricted_problems
from trainer_infra.manifests.pod_walk import containers
from trainer_infra.manifests.runtime import get_in, is_training, pod_spec, replicated_jobs

HOME = "/home/trainer"
HOME_VOLUME = "trainer-platform-home"
WORKSPACE = "/workspace"  # WORKDIR of the catalog's trainer images
SCRATCH_VOLUME = "trainer-platform-scratch"
# Where this injection mounts volumes of its own whatever the runtime (the scratch at WORKSPACE only where
# nothing else is mounted there): `storage.mountPath` may not meet them.
PLATFORM_MOUNTS = {HOME: "HOME (an emptyDir) in every container (runtimes.securityContext)"}
MAX_ID = 2**31 - 1


class RuntimeSecurityContext(StrictModel):
    """The securityContext the platform gives every runtime pod, so they pass Pod Security `restricted`."""

    enabled: bool = Field(
        default=True,
        description="Run runtimes as a non-root user with restricted's settings (seccomp RuntimeDefault, no "
        "privilege escalation, no capabilities but NET_BIND_SERVICE for the MPI runtimes' sshd). Off: images "
        "run as their own user (root for the upstream ones) and `podSecurity: restricted` is refused for every "
        "team.",
    )
    run_as_user: int = Field(default=1000, ge=1, le=MAX_ID, description="uid of every container (not 0).")
    run_as_group: int = Field(default=1000, ge=1, le=MAX_ID, description="Primary gid of every container.")
    fs_group: int | None = Field(
        default=1000,
        ge=1,
        le=MAX_ID,
        description="Pod fsGroup (changed on first mount only, OnRootMismatch): makes volumes whose driver "
        "supports it group-writable. null on NFS exports with root_squash, where kubelet cannot chown.",
    )
    empty_dir_size_limit: PositiveQuantity = Field(
        default="20Gi",
        description="sizeLimit of the HOME and /workspace emptyDirs this injection adds: the kubelet evicts a pod "
        "that writes more there, before the node's disk fills (tenancy.ephemeralStorage bounds the pod as a whole).",
    )


def is_mpi(runtime: Mapping[str, Any]) -> bool:
    return "mpi" in ((runtime.get("spec") or {}).get("mlPolicy") or {})


def _mounted_at(container: Mapping[str, Any], path: str) -> bool:
    return any(m.get("mountPath", "").rstrip("/") == path for m in container.get("volumeMounts") or [])


def _add_volume(pod: dict[str, Any], name: str, size_limit: str) -> None:
    volumes = pod.setdefault("volumes", [])
    if all(v.get("name") != name for v in volumes):
        volumes.append({"name": name, "emptyDir": {"sizeLimit": size_limit}})


def runs_sshd(container: Mapping[str, Any]) -> bool:
    command = container.get("command") or []
    return bool(command) and str(command[0]).rsplit("/", 1)[-1] == "sshd"


def _restricted_mpi(runtime: dict[str, Any]) -> dict[str, Any]:
    for job in replicated_jobs(runtime):
        pod = pod_spec(job)
        sc = pod.setdefault("securityContext", {})
        sc.setdefault("runAsNonRoot", True)
        sc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
        for _, c in containers(pod):
            csc = c.setdefault("securityContext", {})
            csc.setdefault("allowPrivilegeEscalation", False)
            caps = csc.setdefault("capabilities", {})
            caps.setdefault("drop", ["ALL"])
            if runs_sshd(c):
                caps.setdefault("add", list(ALLOWED_CAPABILITIES))
    return runtime


def restricted_pods(settings: RuntimeSecurityContext, runtime: dict[str, Any]) -> dict[str, Any]:
    """Every pod of a runtime gets restricted's settings (MPI: see the module's docstring); values the runtime
    file sets win (and are then judged by the `restricted` guard rail like any other)."""
    out = copy.deepcopy(runtime)
    if not settings.enabled:
        return out
    if is_mpi(out):
        return _restricted_mpi(out)
    for job in replicated_jobs(out):
        pod = pod_spec(job)
        sc = pod.setdefault("securityContext", {})
        sc.setdefault("runAsNonRoot", True)
        sc.setdefault("runAsUser", settings.run_as_user)
        sc.setdefault("runAsGroup", settings.run_as_group)
        if settings.fs_group is not None:
            sc.setdefault("fsGroup", settings.fs_group)
            sc.setdefault("fsGroupChangePolicy", "OnRootMismatch")
        sc.setdefault("seccompProfile", {"type": "RuntimeDefault"})
        for key, c in containers(pod):
            csc = c.setdefault("securityContext", {})
            csc.setdefault("allowPrivilegeEscalation", False)
            csc.setdefault("capabilities", {}).setdefault("drop", ["ALL"])
            env = c.setdefault("env", [])
            if all(e.get("name") != "HOME" for e in env):
                env.append({"name": "HOME", "value": HOME})
            if not _mounted_at(c, HOME) and next(e for e in env if e.get("name") == "HOME").get("value") == HOME:
                c.setdefault("volumeMounts", []).append({"name": HOME_VOLUME, "mountPath": HOME})
                _add_volume(pod, HOME_VOLUME, settings.empty_dir_size_limit)
            if is_training(job) and key.startswith("containers") and not _mounted_at(c, WORKSPACE):
                c.setdefault("volumeMounts", []).append({"name": SCRATCH_VOLUME, "mountPath": WORKSPACE})
                _add_volume(pod, SCRATCH_VOLUME, settings.empty_dir_size_limit)
    return out


MPI_REASON = "MPI over sshd, made restricted-compliant by runtimes.securityContext only (docs/teams.md#pod-security)"


def restricted_refusal(
    runtime: Mapping[str, Any], created_pods: Sequence[tuple[str, Mapping[str, Any]]] = ()
) -> str | None:
    """Why Pod Security `restricted` refuses pods of this runtime, or None. `created_pods`: (what, pod spec) of
    pods the runtime's own containers create at run time (the data cache's LeaderWorkerSet)."""
    for job in replicated_jobs(runtime):
        problems = restricted_problems(get_in(job, "template", "spec", "template", "spec") or {})
        if problems:
            why = f"{job.get('name')} pods: {problems[0]}"
            return f"{MPI_REASON}: {why}" if is_mpi(runtime) else why
    for what, pod in created_pods:
        if problems := restricted_problems(pod):
            return f"{what}: {problems[0]}"
    return None
