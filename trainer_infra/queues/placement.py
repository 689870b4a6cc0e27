"""Runtime injection `placement`: GPU tolerations and Topology-Aware-Scheduling annotations.

Every pod set of a runtime may be given any pool's flavor, so every replicated job tolerates the taints
of every pool (Kueue also adds the flavor's tolerations at admission; the runtime's own tolerations keep
it schedulable when Kueue does not manage the job). TAS annotations go on the training pod sets only
(ancestor step `trainer`, or the job named `node`), from the runtime's placement policy: the level is
written as the node label key Kueue expects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainer_infra.nodepools.labels import level_name
from trainer_infra.queues.config import TopologyPolicy

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig

Manifest = dict[str, Any]

ANNOTATIONS = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology",
}
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"


def resolve_level(level: str, topologies: list[tuple[str, ...]]) -> str | None:
    """The label key a level name means in every topology, or None if some topology lacks it."""
    keys = set()
    for levels in topologies:
        match = [k for k in levels if level == k or level == level_name(k)]
        if len(match) != 1:
            return None
        keys.add(match[0])
    return keys.pop() if len(keys) == 1 else None


def policy_for(cfg: StackConfig, runtime_name: str) -> TopologyPolicy:
    return cfg.queues.placement.runtimes.get(runtime_name, cfg.queues.placement.default)


def tas_annotations(cfg: StackConfig, policy: TopologyPolicy) -> dict[str, str]:
    if not cfg.components.kueue.tas.enabled or not cfg.node_pools:
        return {}
    if policy.unconstrained:
        return {ANNOTATIONS["unconstrained"]: "true"}
    topologies = sorted({p.resolved_topology for p in cfg.node_pools})
    for mode in ("required", "preferred"):
        level = getattr(policy, mode)
        if level is not None:
            key = resolve_level(level, topologies)
            if key is None:  # config validation refuses this; never emit a level Kueue cannot find
                raise ValueError(f"placement level {level!r} is not in every pool topology")
            return {ANNOTATIONS[mode]: key}
    return {}


def pool_tolerations(cfg: StackConfig) -> list[dict[str, str]]:
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for pool in cfg.node_pools:
        for taint in pool.resolved_taints:
            tol = taint.toleration()
            seen.setdefault(tuple(sorted(tol.items())), tol)
    return [seen[k] for k in sorted(seen)]


def _is_training(job: dict[str, Any]) -> bool:
    labels = (job.get("template", {}).get("metadata") or {}).get("labels") or {}
    return bool(labels.get(ANCESTOR_LABEL) == "trainer" or job.get("name") == "node")


def inject_placement(cfg: StackConfig, runtime: Manifest) -> Manifest:
    """Add pool tolerations to every pod set and TAS annotations to the training pod sets."""
    from trainer_infra.plan.injections import pod_spec, pod_template_metadata, replicated_jobs

    if not cfg.node_pools:
        return runtime
    tolerations = pool_tolerations(cfg)
    annotations = tas_annotations(cfg, policy_for(cfg, str(runtime["metadata"]["name"])))
    for job in replicated_jobs(runtime):
        spec = pod_spec(job)
        existing = list(spec.get("tolerations", []))
        spec["tolerations"] = existing + [t for t in tolerations if t not in existing]
        if annotations and _is_training(job):
            md = pod_template_metadata(job)
            # The platform's policy replaces any TAS mode the runtime file chose: Kueue accepts only one.
            kept = {k: v for k, v in (md.get("annotations") or {}).items() if k not in ANNOTATIONS.values()}
            md["annotations"] = {**kept, **annotations}
    return runtime
