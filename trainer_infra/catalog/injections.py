"""The catalog's platform injections (registered in plan/injections.py INJECTIONS): image mirror, the GPU
taint toleration, claim templates shadowed by platform volumes, and default resources. Each takes the stack
config and a runtime manifest and returns a new manifest."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from trainer_infra.catalog.loader import containers, pod_specs
from trainer_infra.config.images import mirror_image
from trainer_infra.policies.rules import GPU_RESOURCE, tolerates_gpu_taint

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig

Manifest = dict[str, Any]


def mirror_images(cfg: StackConfig, runtime: Manifest) -> Manifest:
    """Every container image, and env values naming images (`*_IMAGE`), pulled through the registry mirror."""
    mirror = cfg.images.registry_mirror
    out = copy.deepcopy(runtime)
    if not mirror:
        return out
    for _, pod in pod_specs(out):
        for _, c in containers(pod):
            if isinstance(c.get("image"), str):
                c["image"] = mirror_image(c["image"], mirror)
            for env in c.get("env") or []:
                if str(env.get("name", "")).endswith("_IMAGE") and isinstance(env.get("value"), str):
                    env["value"] = mirror_image(env["value"], mirror)
    return out


def default_resources(cfg: StackConfig, runtime: Manifest) -> Manifest:
    """`runtimes.defaultResources` for every main container that sets no resources, so no runtime pod is
    BestEffort (first evicted) unless its file or an override says otherwise."""
    out = copy.deepcopy(runtime)
    defaults = cfg.runtimes.default_resources
    if defaults is None:
        return out
    for _, pod in pod_specs(out):
        for key, c in containers(pod):
            if key.startswith("containers") and not c.get("resources"):
                c["resources"] = defaults.as_k8s()
    return out


def gpu_tolerations(cfg: StackConfig, runtime: Manifest) -> Manifest:
    """Pods that ask for `nvidia.com/gpu` tolerate the `nvidia.com/gpu:NoSchedule` taint GPU pools carry
    (policy `gpu-runtimes-tolerate-gpu-taint`), or they stay Pending on tainted GPU nodes. The baseline of
    the `placement` concern: node-pool placement may add pool-specific tolerations and selectors."""
    out = copy.deepcopy(runtime)
    toleration = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
    for _, pod in pod_specs(out):
        wants_gpu = any(
            GPU_RESOURCE in ((c.get("resources") or {}).get(section) or {})
            for _, c in containers(pod)
            for section in ("limits", "requests")
        )
        if wants_gpu and not tolerates_gpu_taint(pod.get("tolerations") or []):
            pod["tolerations"] = [*(pod.get("tolerations") or []), dict(toleration)]
    return out


def claim_templates(cfg: StackConfig, runtime: Manifest) -> Manifest:
    """Drop `volumeClaimPolicies` templates whose name a pod volume now carries (e.g. `initializer`, backed
    by the team claim once `storage` is set): the platform's volume wins over the per-TrainJob claim, and
    JobSet refuses a template and a volume of the same name."""
    out = copy.deepcopy(runtime)
    spec = out["spec"]["template"]["spec"]
    volumes = {v.get("name") for _, pod in pod_specs(out) for v in pod.get("volumes") or []}
    policies = []
    for policy in spec.get("volumeClaimPolicies") or []:
        templates = [t for t in policy.get("templates") or [] if (t.get("metadata") or {}).get("name") not in volumes]
        if templates:
            policies.append({**policy, "templates": templates})
    if policies:
        spec["volumeClaimPolicies"] = policies
    else:
        spec.pop("volumeClaimPolicies", None)
    return out
