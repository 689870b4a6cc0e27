"""Pools + teams → Kueue v1beta2 objects. Pure: the same config always gives the same dicts.

- one `Topology` per distinct level list (only with TAS on);
- one `ResourceFlavor` per pool: nodeLabels that select exactly the pool, tolerations for its taints,
  topologyName. Kueue 0.19 makes these three fields immutable once topologyName is set, and Topology
  levels are immutable. Both objects are named after their immutable content (Topology: its levels;
  flavor: pool name + hash), so a change is a new object plus the deletion of the old one once nothing
  refers to it, never an update the API server would refuse; both are also marked replace-on-change;
- one `Cohort`; per team a `ClusterQueue` in it (all pools as flavors of one resource group, the
  team's nominal quota or 0, borrowing/lending limits) and a `LocalQueue` in the team namespace;
- the `WorkloadPriorityClass`es.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from decimal import ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING, Any

from trainer_infra.manifests import meta
from trainer_infra.nodepools.labels import POOL_LABEL, format_quantity, level_name, quantity
from trainer_infra.plan.model import ManagedObject
from trainer_infra.queues.config import PoolQuota, ResourceLimits

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig
    from trainer_infra.nodepools.pool import NodePoolConfig
    from trainer_infra.teams import TeamConfig

KUEUE = "kueue.x-k8s.io/v1beta2"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
FLAVOR_IMMUTABLE = ("spec.topologyName", "spec.nodeLabels", "spec.tolerations")


def covered_resources(pools: list[NodePoolConfig]) -> list[str]:
    """cpu, memory, then every accelerator resource: one resource group, since Kueue lets a resource
    appear in only one group; a pool without some accelerator gets quota 0 for it."""
    accelerators = sorted({p.accelerator_resource for p in pools if p.accelerator_resource})
    return ["cpu", "memory", *accelerators]


def topology_names(pools: list[NodePoolConfig]) -> dict[tuple[str, ...], str]:
    """A readable name per distinct level list (`block-rack-hostname`), hashed only on collision."""
    by_name: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for levels in {p.resolved_topology for p in pools}:
        name = re.sub(r"[^a-z0-9]+", "-", "-".join(level_name(k) for k in levels).lower()).strip("-")
        by_name[name[:200] or "topology"].add(levels)
    out = {}
    for name, variants in by_name.items():
        for levels in variants:
            suffix = "-" + hashlib.sha256("\n".join(levels).encode()).hexdigest()[:8] if len(variants) > 1 else ""
            out[levels] = name + suffix
    return out


def nominal(quota: PoolQuota | None, pool: NodePoolConfig) -> dict[str, Decimal]:
    """The team's nominal quota on a pool per resource; cpu/memory default to the node's share per GPU."""
    quota = quota or PoolQuota()
    per_node = pool.per_node()
    acc = pool.node.accelerator
    out: dict[str, Decimal] = {}
    for res in ("cpu", "memory"):
        given = getattr(quota, res)
        if given is not None:
            out[res] = quantity(given)
        else:
            share = per_node[res] * quota.gpus / acc.count if acc else Decimal(0)
            # Round down (whole bytes, millicores): shares then never add up to more than the node has.
            out[res] = share.quantize(Decimal(1) if res == "memory" else Decimal("0.001"), rounding=ROUND_FLOOR)
    if acc:
        out[acc.resource] = Decimal(quota.gpus)
    return out


def limit_for(limits: ResourceLimits | None, res: str, accelerator: str | None) -> Decimal | None:
    if limits is None:
        return None
    if res == accelerator:
        return None if limits.gpus is None else Decimal(limits.gpus)
    value = getattr(limits, res, None) if res in ("cpu", "memory") else None
    return None if value is None else quantity(value)


def _q(res: str, value: Decimal) -> str:
    return format_quantity(value, binary=res == "memory")


def flavor_spec(pool: NodePoolConfig, topology: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": pool.flavor_labels}
    tolerations = [t.toleration() for t in pool.resolved_taints]
    if tolerations:
        spec["tolerations"] = tolerations
    if topology:
        spec["topologyName"] = topology
    return spec


def flavor_name(pool: NodePoolConfig, spec: dict[str, Any]) -> str:
    """`<pool>-<hash of the immutable fields>`. A change of those fields makes a new flavor that the queues
    switch to, and the old one is deleted afterwards. Replacing in place under one name would deadlock:
    Kueue's `resource-in-use` finalizer holds the delete while ClusterQueues still name the flavor."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    return f"{pool.name}-{digest}"


def resource_flavor(pool: NodePoolConfig, topology: str | None) -> ManagedObject:
    spec = flavor_spec(pool, topology)
    md = meta.metadata(flavor_name(pool, spec), labels={POOL_LABEL: pool.name})
    manifest = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": md, "spec": spec}
    # Same name ⇒ same immutable fields; should that ever not hold, the change still shows as a replace.
    return ManagedObject(manifest, delete_before_replace=True, replace_on_changes=FLAVOR_IMMUTABLE)


def cluster_queue(
    cfg: StackConfig, team: TeamConfig, covered: list[str], flavor_names: dict[str, str]
) -> dict[str, Any]:
    q = cfg.queues
    flavors = []
    for pool in cfg.node_pools:
        quota = team.quota.get(pool.name)
        amounts = nominal(quota, pool)
        resources = []
        for res in covered:
            entry: dict[str, Any] = {"name": res, "nominalQuota": _q(res, amounts.get(res, Decimal(0)))}
            if res in amounts and quota is not None:
                for key, limits in (("borrowingLimit", quota.borrowing_limit), ("lendingLimit", quota.lending_limit)):
                    value = limit_for(limits, res, pool.accelerator_resource)
                    if value is not None:
                        entry[key] = _q(res, value)
            resources.append(entry)
        flavors.append({"name": flavor_names[pool.name], "resources": resources})
    spec: dict[str, Any] = {
        "cohortName": q.cohort.name,
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.resolved_namespace}},
        "queueingStrategy": q.queueing_strategy,
        "preemption": {
            "withinClusterQueue": q.preemption.within_cluster_queue,
            "reclaimWithinCohort": q.preemption.reclaim_within_cohort,
            "borrowWithinCohort": {"policy": q.preemption.borrow_within_cohort},
        },
        "resourceGroups": [{"coveredResources": covered, "flavors": flavors}] if flavors else [],
    }
    if team.fair_sharing_weight is not None:
        spec["fairSharing"] = {"weight": team.fair_sharing_weight}
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": meta.metadata(team.name), "spec": spec}


def local_queue(team: TeamConfig) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": meta.metadata(team.local_queue, team.resolved_namespace),
        "spec": {"clusterQueue": team.name},
    }


def queue_objects(cfg: StackConfig) -> list[ManagedObject]:
    pools = list(cfg.node_pools)
    if not pools and not cfg.teams:
        return []
    tas = cfg.components.kueue.tas.enabled
    names = topology_names(pools) if tas else {}
    objects: list[ManagedObject] = []
    for levels, name in sorted(names.items(), key=lambda kv: kv[1]):
        manifest = {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": meta.metadata(name),
            "spec": {"levels": [{"nodeLabel": key} for key in levels]},
        }
        objects.append(ManagedObject(manifest, delete_before_replace=True, replace_on_changes=("spec.levels",)))
    flavors = [resource_flavor(p, names.get(p.resolved_topology)) for p in pools]
    objects += flavors
    flavor_names = {p.name: f.manifest["metadata"]["name"] for p, f in zip(pools, flavors, strict=True)}
    objects.append(
        ManagedObject(
            {"apiVersion": KUEUE, "kind": "Cohort", "metadata": meta.metadata(cfg.queues.cohort.name), "spec": {}}
        )
    )
    covered = covered_resources(pools)
    for team in cfg.teams:
        objects.append(ManagedObject(cluster_queue(cfg, team, covered, flavor_names)))
        objects.append(ManagedObject(local_queue(team)))
    for pc in cfg.queues.priority_classes:
        wpc: dict[str, Any] = {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": meta.metadata(pc.name),
            "value": pc.value,
        }
        if pc.description:
            wpc["description"] = pc.description
        objects.append(ManagedObject(wpc))
    return objects
