"""Runtime injection `placement`: pool tolerations and Topology-Aware-Scheduling annotations.

Every pod set of a runtime may be given any pool's flavor, so every replicated job tolerates the taints
of every pool (Kueue also adds the flavor's tolerations at admission; the runtime's own tolerations keep
it schedulable when Kueue does not manage the job). TAS annotations go on the training pod sets only
(ancestor step `trainer`, or the job named `node`), from the runtime's placement policy: the level is
written as the node label key Kueue expects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_infra.core.upstream.kueue import TOPOLOGY_ANNOTATIONS
from trainer_infra.manifests.runtime import (
    is_training,
    pod_spec,
    pod_template_metadata,
    replicated_jobs,
    with_tolerations,
)
from trainer_infra.nodepools.labels import level_name
from trainer_infra.queues.config import PlacementConfig, TopologyPolicy
from trainer_infra.queues.resolve import ResolvedQueues

Manifest = dict[str, Any]


def resolve_level(level: str, topologies: list[tuple[str, ...]]) -> str | None:
    """The label key a level name means in every topology, or None if some topology lacks it."""
    keys = set()
    for levels in topologies:
        match = [k for k in levels if level == k or level == level_name(k)]
        if len(match) != 1:
            return None
        keys.add(match[0])
    return keys.pop() if len(keys) == 1 else None


def tas_annotations(policy: TopologyPolicy, topologies: list[tuple[str, ...]]) -> dict[str, str]:
    """The pod-set annotation of one policy (`topologies` empty: TAS off or no pools → none)."""
    if not topologies:
        return {}
    if policy.unconstrained:
        return {TOPOLOGY_ANNOTATIONS["unconstrained"]: "true"}
    for mode in ("required", "preferred"):
        level = getattr(policy, mode)
        if level is not None:
            key = resolve_level(level, topologies)
            if key is None:  # config validation refuses this; never emit a level Kueue cannot find
                raise ValueError(f"placement level {level!r} is not in every pool topology")
            return {TOPOLOGY_ANNOTATIONS[mode]: key}
    return {}


@dataclass(frozen=True)
class Placement:
    """What the `placement` injection adds, resolved once for the stack."""

    active: bool = False  # the stack has node pools
    tolerations: list[dict[str, str]] = field(default_factory=list)
    default: dict[str, str] = field(default_factory=dict)
    by_runtime: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def resolve(cls, cfg: PlacementConfig, queues: ResolvedQueues) -> Placement:
        """Every pool taint's toleration, once each and sorted; the TAS annotations of each runtime's policy."""
        tolerations = {tuple(sorted(tol.items())): tol for pool in queues.pools for tol in pool.tolerations}
        topologies = sorted(queues.topologies)
        return cls(
            bool(queues.pools),
            [tolerations[k] for k in sorted(tolerations)],
            tas_annotations(cfg.default, topologies),
            {name: tas_annotations(p, topologies) for name, p in cfg.runtimes.items()},
        )


def inject_placement(placement: Placement, runtime: Manifest) -> Manifest:
    """Add pool tolerations to every pod set and TAS annotations to the training pod sets."""
    if not placement.active:
        return runtime
    annotations = placement.by_runtime.get(str(runtime["metadata"]["name"]), placement.default)
    for job in replicated_jobs(runtime):
        with_tolerations(pod_spec(job), placement.tolerations)
        if annotations and is_training(job):
            md = pod_template_metadata(job)
            # The platform's policy replaces any TAS mode the runtime file chose: Kueue accepts only one.
            kept = {k: v for k, v in (md.get("annotations") or {}).items() if k not in TOPOLOGY_ANNOTATIONS.values()}
            md["annotations"] = {**kept, **annotations}
    return runtime
