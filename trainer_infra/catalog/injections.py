"""Platform injections into runtimes: small pure functions, one concern each, applied in a fixed order.

A runtime file in `runtimes/` describes *what* a training job looks like; the platform decides *where and
how* it runs on this cluster. Each concern is a function of the facts it needs (resolved once for the
stack, `RuntimeFacts`) and a runtime manifest, returning a new manifest; a new concern is one function plus
one line in INJECTIONS. The catalog's own concerns live here; the others beside the area that owns them
(placement: queues, shared volume: storage, HF token: tenancy).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer_infra.catalog.fault_tolerance import FaultTolerance, inject_fault_tolerance
from trainer_infra.catalog.security_context import RuntimeSecurityContext, restricted_pods
from trainer_infra.core.images import mirror_image
from trainer_infra.core.model import Resources
from trainer_infra.manifests.pod_walk import containers
from trainer_infra.manifests.runtime import (
    GENERIC_GPU,
    accelerators_of,
    exists_toleration,
    pod_specs,
    replace_images,
    tolerates,
)
from trainer_infra.queues.placement import Placement, inject_placement
from trainer_infra.storage.config import StorageConfig
from trainer_infra.storage.injection import shared_workspace
from trainer_infra.tenancy.injection import hf_token_env, hub_endpoint_env

Manifest = dict[str, Any]


@dataclass(frozen=True)
class RuntimeFacts:
    """What the injections know about the stack."""

    mirror: str | None = None
    placement: Placement = field(default_factory=Placement)
    storage: StorageConfig | None = None
    hf_token: bool = False  # some team has a Hugging Face token
    hub_endpoint: str | None = None  # the Hub the initializers download from (tenancy.hub.endpoint)
    default_resources: Resources | None = None
    accelerators: tuple[str, ...] = ()  # the accelerator resources the stack's pools offer, sorted
    fault_tolerance: FaultTolerance = field(default_factory=FaultTolerance)  # this runtime's, overrides merged
    security_context: RuntimeSecurityContext = field(default_factory=RuntimeSecurityContext)


def mirror_images(mirror: str | None, runtime: Manifest) -> Manifest:
    """Every container image, and env values naming images (`*_IMAGE`), pulled through the registry mirror."""
    out = copy.deepcopy(runtime)
    if not mirror:
        return out
    for _, pod in pod_specs(out):
        for _, c in containers(pod):
            replace_images(c, lambda image: mirror_image(image, mirror))
    return out


def default_resources(defaults: Resources | None, runtime: Manifest) -> Manifest:
    """`runtimes.defaultResources` for every main container that sets no resources, so no runtime pod is
    BestEffort (first evicted) unless its file or an override says otherwise."""
    out = copy.deepcopy(runtime)
    if defaults is None:
        return out
    for _, pod in pod_specs(out):
        for key, c in containers(pod):
            if key.startswith("containers") and not c.get("resources"):
                c["resources"] = defaults.as_k8s()
    return out


def accelerator_resource(accelerators: tuple[str, ...], runtime: Manifest) -> Manifest:
    """Catalog files ask for `nvidia.com/gpu` meaning "a GPU". When the stack's pools offer exactly one
    accelerator resource and it is another one (`amd.com/gpu`), runtimes ask for that one: otherwise no
    ClusterQueue covers what they request and Kueue never admits them."""
    out = copy.deepcopy(runtime)
    if len(accelerators) != 1 or accelerators[0] == GENERIC_GPU:
        return out
    (target,) = accelerators
    for _, pod in pod_specs(out):
        for _, c in containers(pod):
            for section in ("limits", "requests"):
                values = (c.get("resources") or {}).get(section) or {}
                if GENERIC_GPU in values:
                    values[target] = values.pop(GENERIC_GPU)
    return out


def accelerator_tolerations(accelerators: tuple[str, ...], runtime: Manifest) -> Manifest:
    """Pods that ask for an accelerator tolerate the taint nodes offering it carry. Pools the stack declares
    give their own taints (injection `placement`, from each pool's resolved taints); an accelerator no pool
    declares gets the vendors' convention, a taint keyed by the resource (`amd.com/gpu:NoSchedule`). Policy
    `gpu-runtimes-tolerate-gpu-taint` checks the result."""
    out = copy.deepcopy(runtime)
    for _, pod in pod_specs(out):
        for resource in sorted(accelerators_of(pod) - set(accelerators)):
            if not tolerates(pod.get("tolerations") or [], resource):
                pod["tolerations"] = [*(pod.get("tolerations") or []), exists_toleration(resource)]
    return out


def claim_templates(runtime: Manifest) -> Manifest:
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


Injection = Callable[[RuntimeFacts, Manifest], Manifest]

# (name, function) in application order.
INJECTIONS: list[tuple[str, Injection]] = [
    ("images", lambda facts, rt: mirror_images(facts.mirror, rt)),
    ("accelerator", lambda facts, rt: accelerator_resource(facts.accelerators, rt)),
    ("placement", lambda facts, rt: inject_placement(facts.placement, rt)),
    ("shared-volume", lambda facts, rt: shared_workspace(facts.storage, rt)),
    ("hf-token", lambda facts, rt: hf_token_env(facts.hf_token, rt)),
    ("hub-endpoint", lambda facts, rt: hub_endpoint_env(facts.hub_endpoint, rt)),
    ("gpu-tolerations", lambda facts, rt: accelerator_tolerations(facts.accelerators, rt)),
    ("claim-templates", lambda facts, rt: claim_templates(rt)),
    ("pod-security", lambda facts, rt: restricted_pods(facts.security_context, rt)),  # after shared-volume
    ("resources", lambda facts, rt: default_resources(facts.default_resources, rt)),
    ("fault-tolerance", lambda facts, rt: inject_fault_tolerance(facts.fault_tolerance, rt)),
]


def apply_injections(facts: RuntimeFacts, runtime: Manifest) -> Manifest:
    out = copy.deepcopy(runtime)
    for _, inject in INJECTIONS:
        out = inject(facts, out)
    return out
