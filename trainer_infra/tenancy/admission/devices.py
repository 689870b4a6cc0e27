"""Admission rules on how a pod gets accelerators: only as the resources Kueue charges. No env or mount
selects GPUs past the device plugin's allocation (`manifests/device_env.py`), and no resourceClaims (Dynamic
Resource Allocation, which Kueue does not charge here)."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.manifests.device_env import DEVICE_LIST_DIR, GPU_ENV_NAMES, GPU_ENV_PREFIXES
from trainer_infra.manifests.runtime import GENERIC_GPU


def gpu_resources(settings: AdmissionSettings) -> tuple[str, ...]:
    """The accelerator resources a member requests here: the pools', or the catalog's generic GPU (what
    runtimes ask for when no pool names one)."""
    return settings.accelerators or (GENERIC_GPU,)


def device_env_ok(name: str) -> str:
    """CEL: env name `name` selects no GPU by itself."""
    prefixes = " || ".join(f"{name}.startsWith('{p}')" for p in GPU_ENV_PREFIXES)
    return f"!({prefixes} || {name} in {lit(list(GPU_ENV_NAMES))})"


def _device_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    parts = []
    for f in kind.pod.containers:
        checks = [
            f"(!has(c.env) || c.env.all(e, {device_env_ok('e.name')}))",
            f"(!has(c.volumeMounts) || c.volumeMounts.all(m, !m.mountPath.contains('{DEVICE_LIST_DIR}')))",
        ]
        if kind.name != "TrainJob":  # a runtime patch's containers have no envFrom
            checks.append(f"(!has(c.envFrom) || c.envFrom.all(x, !has(x.prefix) || {device_env_ok('x.prefix')}))")
        parts.append(f"(!has(s.{f}) || s.{f}.all(c, {' && '.join(checks)}))")
    return " && ".join(parts)


_DEVICE_MESSAGE = (
    f"sets a GPU-selection variable ({', '.join(p + '*' for p in GPU_ENV_PREFIXES)}, {', '.join(GPU_ENV_NAMES)}) "
    "in {where}, or mounts a volume under /var/run/nvidia-container-devices: container runtimes that honour "
    "them hand the pod GPUs Kueue never charged, other teams' included. "
    "Request GPUs with spec.trainer.resourcesPerNode (CUDA_VISIBLE_DEVICES, which only narrows the GPUs a pod "
    "was given, stays allowed)"
)
DEVICE_ENV = AdmissionRule(
    "deviceEnv",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    _DEVICE_MESSAGE.replace("{where}", "a container's env or envFrom prefix (runtimePatches[].…containers[].env)"),
    _device_env,
    per_pod=True,
)


def _trainer_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return (
        "!has(object.spec.trainer) || !has(object.spec.trainer.env) || "
        f"object.spec.trainer.env.all(e, {device_env_ok('e.name')})"
    )


def _no_resource_claims(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    containers = " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, !has(c.resources) || !has(c.resources.claims)))"
        for f in kind.pod.containers
        if f != "ephemeralContainers"  # they have no resources
    )
    return f"!has(s.resourceClaims) && {containers}"


def _resource_claims_message(settings: AdmissionSettings) -> str:
    """Names the accelerators the stack's pools offer: what a member can actually request and be charged for."""
    return (
        "requests devices through resourceClaims (Dynamic Resource Allocation): Kueue does not charge them here, "
        f"so the GPUs would be your team's for free. Request GPUs as resources ({', '.join(gpu_resources(settings))})"
    )


RESOURCE_CLAIMS = AdmissionRule(
    "resourceClaims",
    ("Pod", "JobSet", "TrainingRuntime"),
    _resource_claims_message,
    _no_resource_claims,
    per_pod=True,
)


TRAINER_DEVICE_ENV = AdmissionRule(
    "trainerDeviceEnv", ("TrainJob",), _DEVICE_MESSAGE.replace("{where}", "spec.trainer.env"), _trainer_env
)
