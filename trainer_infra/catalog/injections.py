"""The catalog's platform injections (registered in plan/injections.py INJECTIONS): image mirror and
default resources. Each takes the stack config and a runtime manifest and returns a new manifest."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from trainer_infra.catalog.loader import containers, pod_specs
from trainer_infra.config.images import mirror_image

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
