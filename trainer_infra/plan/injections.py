"""Platform injections into runtimes: small pure functions, one concern each, applied in a fixed order.

A runtime file in `runtimes/` describes *what* a training job looks like; the platform decides
*where and how* it runs on this cluster (registry mirror, GPU tolerations and placement, TAS
annotations, the shared volume, default resources). Each concern is one function
`(config, runtime manifest) -> runtime manifest` that must not mutate its input; a new concern is a
new function plus one line in INJECTIONS. Order matters and is fixed here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from trainer_infra.catalog.injections import claim_templates, default_resources, gpu_tolerations, mirror_images
from trainer_infra.config.stack import StackConfig
from trainer_infra.queues.placement import inject_placement
from trainer_infra.storage.injection import shared_workspace
from trainer_infra.tenancy.injection import hf_token_env

Manifest = dict[str, Any]
Injection = Callable[[StackConfig, Manifest], Manifest]

# (name, function) in application order. Issues plug in here:
#   images: registry mirror (catalog); placement: GPU tolerations/nodeSelector and TAS annotations
#   (node pools); storage: shared volume mounts (storage); resources: default requests (catalog).
INJECTIONS: list[tuple[str, Injection]] = [
    ("images", mirror_images),
    ("placement", inject_placement),
    ("shared-volume", shared_workspace),
    ("hf-token", hf_token_env),
    ("gpu-tolerations", gpu_tolerations),
    ("claim-templates", claim_templates),
    ("resources", default_resources),
]


def apply_injections(cfg: StackConfig, runtime: Manifest) -> Manifest:
    out = copy.deepcopy(runtime)
    for _, inject in INJECTIONS:
        out = inject(cfg, out)
    return out


def replicated_jobs(runtime: Manifest) -> list[dict[str, Any]]:
    """The JobSet replicatedJobs of a (Cluster)TrainingRuntime, the unit most injections edit."""
    jobs: list[dict[str, Any]] = runtime["spec"]["template"]["spec"].get("replicatedJobs", [])
    return jobs


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["template"]["spec"]["template"].setdefault("spec", {})
    return spec


def pod_template_metadata(job: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = job["template"]["spec"]["template"].setdefault("metadata", {})
    return meta
