"""Resolved pools + teams → Kueue objects, at the API version of the installed Kueue release. Pure: the same
config always gives the same dicts.

- one `Topology` per distinct level list (only with TAS on);
- one `ResourceFlavor` per pool: nodeLabels that select exactly the pool, tolerations for its taints,
  topologyName. Kueue 0.19 makes these three fields immutable once topologyName is set, and Topology
  levels are immutable. Both objects are named after their immutable content (Topology: its levels;
  flavor: pool name + hash), so a change is a new object plus the deletion of the old one once nothing
  refers to it, never an update the API server would refuse; both are also marked replace-on-change;
- one `Cohort`; per team a `ClusterQueue` in it (all pools as flavors of one resource group, the
  team's resolved limits: nominal quota or 0, borrowing/lending limits) and a `LocalQueue` in the team
  namespace;
- the `WorkloadPriorityClass`es;
- per pool whose nodes exist only once requested (GKE queued provisioning): a `ProvisioningRequestConfig` and an
  `AdmissionCheck` (controller kueue.x-k8s.io/provisioning-request), required by every ClusterQueue on that pool's
  flavor (`admissionChecksStrategy.onFlavors`). Kueue then asks the cluster autoscaler for the nodes before it
  admits, and with TAS assigns the topology only once they exist (Kueue 0.19.2
  pkg/scheduler/flavorassigner/tas_flavorassigner.go: DelayedTopologyRequest for a flavor with a ProvisioningRequest
  check); a failed request sends the job back to the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.upstream.kubernetes import NAMESPACE_NAME_LABEL
from trainer_infra.core.upstream.kueue import PROVISIONING_CONTROLLER
from trainer_infra.manifests import meta
from trainer_infra.nodepools.labels import POOL_LABEL
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.queues.config import QueuesConfig
from trainer_infra.queues.resolve import QueueLimits, ResolvedQueues
from trainer_infra.teams.model import TeamConfig

FLAVOR_IMMUTABLE = ("spec.topologyName", "spec.nodeLabels", "spec.tolerations")
TOPOLOGY_IMMUTABLE = ("spec.levels",)


def resource_flavor(api: str, pool: str, flavor_name: str, spec: dict[str, Any]) -> ManagedObject:
    md = meta.metadata(flavor_name, labels={POOL_LABEL: pool})
    manifest = {"apiVersion": api, "kind": "ResourceFlavor", "metadata": md, "spec": spec}
    # Same name ⇒ same immutable fields; should that ever not hold, the change still shows as a replace.
    return ManagedObject(manifest, delete_before_replace=True, replace_on_changes=FLAVOR_IMMUTABLE)


def resource_groups(covered: Sequence[str], flavors: Sequence[tuple[str, QueueLimits]]) -> list[dict[str, Any]]:
    """A ClusterQueue's `resourceGroups`: one group over `flavors` (flavor name, the team's limits there),
    every covered resource in each, with quota 0 where the flavor's pool has none of it."""
    entries = []
    for name, limits in flavors:
        resources = []
        for res in covered:
            entry: dict[str, Any] = {
                "name": res,
                "nominalQuota": format_amount(res, limits.nominal.get(res, Decimal(0))),
            }
            for key, table in (("borrowingLimit", limits.borrowing), ("lendingLimit", limits.lending)):
                if res in table:
                    entry[key] = format_amount(res, table[res])
            resources.append(entry)
        entries.append({"name": name, "resources": resources})
    return [{"coveredResources": list(covered), "flavors": entries}] if entries else []


def cluster_queue(api: str, q: QueuesConfig, team: TeamConfig, resolved: ResolvedQueues) -> dict[str, Any]:
    flavors = [(resolved.flavors[p.name].name, resolved.limits(team.name, p.name)) for p in resolved.pools]
    spec: dict[str, Any] = {
        "cohortName": q.cohort.name,
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.resolved_namespace}},
        "queueingStrategy": q.queueing_strategy,
        "preemption": {
            "withinClusterQueue": q.preemption.within_cluster_queue,
            "reclaimWithinCohort": q.preemption.reclaim_within_cohort,
            "borrowWithinCohort": {"policy": q.preemption.borrow_within_cohort},
        },
        "resourceGroups": resource_groups(resolved.covered, flavors),
    }
    checks = [
        {"name": provisioning_check_name(p.name), "onFlavors": [resolved.flavors[p.name].name]}
        for p in resolved.pools
        if p.provisioning is not None
    ]
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": checks}
    if team.fair_sharing_weight is not None:
        spec["fairSharing"] = {"weight": team.fair_sharing_weight}
    return {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": meta.metadata(cluster_queue_name(team), None, {meta.TEAM_LABEL: team.name}),
        "spec": spec,
    }


def provisioning_check_name(pool: str) -> str:
    """The AdmissionCheck (and its ProvisioningRequestConfig) of a pool provisioned on request."""
    return f"{pool}-provisioning"


def provisioning_objects(api: str, pool: ResolvedPool) -> list[ManagedObject]:
    if pool.provisioning is None:
        return []
    name = provisioning_check_name(pool.name)
    group = api.split("/")[0]
    config = {
        "apiVersion": api,
        "kind": "ProvisioningRequestConfig",
        "metadata": meta.metadata(name),
        "spec": {
            "provisioningClassName": pool.provisioning.provisioning_class,
            "managedResources": list(pool.provisioning.managed_resources),
        },
    }
    check = {
        "apiVersion": api,
        "kind": "AdmissionCheck",
        "metadata": meta.metadata(name),
        "spec": {
            "controllerName": PROVISIONING_CONTROLLER,
            "parameters": {"apiGroup": group, "kind": "ProvisioningRequestConfig", "name": name},
        },
    }
    return [ManagedObject(config), ManagedObject(check)]


def cluster_queue_name(team: TeamConfig) -> str:
    """Each team has one ClusterQueue, named like the team (its LocalQueue points at it)."""
    return team.name


def local_queue(api: str, team: TeamConfig) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "LocalQueue",
        "metadata": meta.metadata(team.local_queue, team.resolved_namespace),
        "spec": {"clusterQueue": cluster_queue_name(team)},
    }


def queue_objects(
    api: str, q: QueuesConfig, teams: Sequence[TeamConfig], resolved: ResolvedQueues
) -> list[ManagedObject]:
    """`api` is the Kueue API version of the installed release (versions/matrix.yaml)."""
    if not resolved.pools and not teams:
        return []
    objects: list[ManagedObject] = []
    for levels, name in sorted(resolved.topologies.items(), key=lambda kv: kv[1]):
        manifest = {
            "apiVersion": api,
            "kind": "Topology",
            "metadata": meta.metadata(name),
            "spec": {"levels": [{"nodeLabel": key} for key in levels]},
        }
        objects.append(ManagedObject(manifest, delete_before_replace=True, replace_on_changes=TOPOLOGY_IMMUTABLE))
    for pool in resolved.pools:
        flavor = resolved.flavors[pool.name]
        objects.append(resource_flavor(api, pool.name, flavor.name, flavor.spec))
        objects += provisioning_objects(api, pool)
    objects.append(
        ManagedObject({"apiVersion": api, "kind": "Cohort", "metadata": meta.metadata(q.cohort.name), "spec": {}})
    )
    for team in teams:
        objects.append(ManagedObject(cluster_queue(api, q, team, resolved)))
        objects.append(ManagedObject(local_queue(api, team)))
    for pc in q.priority_classes:
        wpc: dict[str, Any] = {
            "apiVersion": api,
            "kind": "WorkloadPriorityClass",
            "metadata": meta.metadata(pc.name),
            "value": pc.value,
        }
        if pc.description:
            wpc["description"] = pc.description
        objects.append(ManagedObject(wpc))
    return objects
