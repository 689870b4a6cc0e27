"""What a replay needs to know of a stack, read from its render (the objects `pulumi up` would create).

Read from the render rather than the config so the replay sees exactly what a cluster gets: the derived
ClusterQueues with their limits, the LocalQueues, the priority classes, the runtimes and the kwok nodes.
Also decides, before anything runs, which jobs can never be admitted (bigger than any pool, than the
team's queue can ever hold, or than the runtime's required topology domain), so a replay never waits on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainer_infra.core.errors import ConfigIssue, did_you_mean
from trainer_infra.core.quantity import quantity
from trainer_infra.core.upstream import nvidia
from trainer_infra.core.upstream.kueue import TOPOLOGY_ANNOTATIONS
from trainer_infra.nodepools.labels import POOL_LABEL
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.trace import TraceError, TraceRow

Obj = dict[str, Any]
#: Replicated jobs whose pods run the training (initializers finish on their own in the control plane).
TRAINING_JOBS = ("launcher", "node")


@dataclass(frozen=True)
class Quota:
    """A ClusterQueue's accelerator quota in one flavor."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class Team:
    """A team as the replay submits for it: namespace, LocalQueue, ClusterQueue, fair-sharing weight."""

    name: str
    local_queue: str
    cluster_queue: str
    weight: float


@dataclass(frozen=True)
class Pool:
    """The kwok nodes of one pool (its flavor's node label)."""

    name: str
    nodes: tuple[Obj, ...]
    accelerators_per_node: int

    def pods_per_node(self, accelerators: int) -> int:
        return self.accelerators_per_node // accelerators

    def largest_domain(self, level: str | None) -> int:
        """Nodes in the largest domain of a topology level (the whole pool without one)."""
        if level is None:
            return len(self.nodes)
        domains: dict[str, int] = {}
        for node in self.nodes:
            value = node["metadata"].get("labels", {}).get(level)
            if value is not None:
                domains[value] = domains.get(value, 0) + 1
        return max(domains.values(), default=0)


@dataclass
class StackFacts:
    """The scheduling objects of a render, indexed for the replay."""

    resource: str
    teams: dict[str, Team]
    pools: dict[str, Pool]
    #: ClusterQueue → flavor → quota of the accelerator resource
    quotas: dict[str, dict[str, Quota]]
    #: ClusterQueue → cohort (None: no cohort)
    cohorts: dict[str, str | None]
    #: flavor → pool
    flavor_pools: dict[str, str]
    priorities: dict[str, int]
    #: runtime → required topology level of its trainer pods (None: none)
    runtimes: dict[str, str | None]
    default_runtime: str
    #: runtime → its replicated jobs whose pods run the training (they get the row's duration)
    replicated_jobs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    objects: list[Obj] = field(default_factory=list)

    @property
    def limits(self) -> dict[str, tuple[int, int]]:
        """ClusterQueue → (nominal, the most it may hold: nominal + borrowing limit, or + what its cohort lends)."""
        return {
            cq: (sum(q.nominal for q in flavors.values()), self.most_usable(cq)) for cq, flavors in self.quotas.items()
        }

    def team_quotas(self) -> dict[str, int]:
        """Team → its ClusterQueue's nominal quota of the accelerator resource."""
        limits = self.limits
        return {t.name: limits.get(t.cluster_queue, (0, 0))[0] for t in self.teams.values()}

    def weights(self) -> dict[str, float]:
        """Team → its ClusterQueue's fair-sharing weight."""
        return {t.name: t.weight for t in self.teams.values()}

    @property
    def capacity(self) -> int:
        """Accelerators of every pool."""
        return sum(len(p.nodes) * p.accelerators_per_node for p in self.pools.values())

    def most_usable(self, cq: str) -> int:
        """The most accelerators a ClusterQueue can ever hold: nominal + borrowing limit, or + what the rest
        of its cohort lends when it has no limit."""
        own = self.quotas.get(cq, {})
        total = 0
        for flavor, quota in own.items():
            if self.cohorts.get(cq) is None:
                total += quota.nominal
                continue
            lendable = sum(
                (q.lending_limit if q.lending_limit is not None else q.nominal)
                for other, flavors in self.quotas.items()
                if other != cq and self.cohorts.get(other) == self.cohorts[cq]
                for f, q in flavors.items()
                if f == flavor
            )
            borrow = lendable if quota.borrowing_limit is None else min(lendable, quota.borrowing_limit)
            total += quota.nominal + borrow
        return total

    def outcome(self, row: TraceRow, checkpoint: float, never_admissible: str = "") -> JobOutcome:
        """The record of a row's job before it is replayed (`checkpoint`: the interval of a row giving none)."""
        team = self.teams[row.team]
        return JobOutcome(
            str(row.name),
            row.team,
            team.cluster_queue,
            row.total_accelerators,
            row.duration,
            row.submit,
            never_admissible=never_admissible,
            checkpoint=row.checkpoint_interval(checkpoint),
        )

    def never_admissible(self, row: TraceRow) -> str | None:
        """Why Kueue can never admit this job, or None."""
        team = self.teams[row.team]
        runtime = row.runtime or self.default_runtime
        level = self.runtimes.get(runtime)
        flavors = self.quotas.get(team.cluster_queue, {})
        pools = [self.pools[self.flavor_pools[f]] for f in flavors if self.flavor_pools.get(f) in self.pools]
        if not pools:
            return f"ClusterQueue {team.cluster_queue} has no {self.resource} quota on a pool with nodes"
        most = self.most_usable(team.cluster_queue)
        if row.total_accelerators > most:
            return (
                f"{row.total_accelerators} {self.resource} is more than ClusterQueue {team.cluster_queue} can ever "
                f"hold ({most}: nominal quota + what it may borrow)"
            )
        fits = [p for p in pools if p.pods_per_node(row.accelerators) >= 1]
        if not fits:
            per_node = max(p.accelerators_per_node for p in pools)
            return f"{row.accelerators} {self.resource} per node; the largest node has {per_node}"
        room = max(p.largest_domain(level) * p.pods_per_node(row.accelerators) for p in fits)
        if row.nodes > room:
            where = f"one {level} domain (runtime {runtime} requires it)" if level else "any pool"
            return f"{row.nodes} nodes of {row.accelerators} {self.resource} do not fit {where}: at most {room}"
        return None

    def check(self, rows: Sequence[TraceRow]) -> None:
        """Unknown teams, runtimes and priorities, each with the accepted values (TraceError)."""
        issues: list[ConfigIssue] = []
        for row in rows:
            checks = (
                ("team", row.team, self.teams),
                ("runtime", row.runtime, self.runtimes),
                ("priority", row.priority, self.priorities),
            )
            for name, value, accepted in checks:
                if value is not None and value not in accepted:
                    hint = did_you_mean(value, accepted)
                    message = f"unknown {name}; accepted: {', '.join(sorted(accepted))}"
                    issues.append(ConfigIssue(f"job {row.name}: {name}", message, value, hint))
        if issues:
            raise TraceError(issues)


def _of_kind(objects: Sequence[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o.get("kind") == kind]


def _count(value: Any) -> int:
    return int(quantity(str(value)))


def stack_facts(objects: list[Obj], resource: str = nvidia.GPU) -> StackFacts:
    """Index a render's objects (manifests.yaml) for a replay."""
    quotas: dict[str, dict[str, Quota]] = {}
    cohorts: dict[str, str | None] = {}
    weights: dict[str, float] = {}
    for cq in _of_kind(objects, "ClusterQueue"):
        name, spec = cq["metadata"]["name"], cq["spec"]
        cohorts[name] = spec.get("cohortName") or spec.get("cohort")
        weights[name] = float(Decimal(str(spec.get("fairSharing", {}).get("weight", "1"))))
        for group in spec.get("resourceGroups", []):
            for flavor in group.get("flavors", []):
                for res in flavor.get("resources", []):
                    if res["name"] == resource:
                        quotas.setdefault(name, {})[flavor["name"]] = Quota(
                            _count(res["nominalQuota"]),
                            _count(res["borrowingLimit"]) if "borrowingLimit" in res else None,
                            _count(res["lendingLimit"]) if "lendingLimit" in res else None,
                        )
    teams = {
        lq["metadata"]["namespace"]: Team(
            lq["metadata"]["namespace"],
            lq["metadata"]["name"],
            lq["spec"]["clusterQueue"],
            weights.get(lq["spec"]["clusterQueue"], 1.0),
        )
        for lq in _of_kind(objects, "LocalQueue")
    }
    by_pool: dict[str, list[Obj]] = {}
    for node in _of_kind(objects, "Node"):
        if resource in node.get("status", {}).get("allocatable", {}):
            by_pool.setdefault(node["metadata"].get("labels", {}).get(POOL_LABEL, ""), []).append(node)
    pools = {
        name: Pool(name, tuple(nodes), max(_count(n["status"]["allocatable"][resource]) for n in nodes))
        for name, nodes in by_pool.items()
    }
    flavor_pools = {
        f["metadata"]["name"]: f.get("spec", {}).get("nodeLabels", {}).get(POOL_LABEL, "")
        for f in _of_kind(objects, "ResourceFlavor")
    }
    runtimes: dict[str, str | None] = {}
    replicated: dict[str, tuple[str, ...]] = {}
    for rt in _of_kind(objects, "ClusterTrainingRuntime"):
        jobs = rt["spec"]["template"]["spec"].get("replicatedJobs", [])
        names = tuple(j["name"] for j in jobs if j["name"] in TRAINING_JOBS)
        replicated[rt["metadata"]["name"]] = names or tuple(j["name"] for j in jobs[-1:])
        node = next((j for j in jobs if j["name"] == "node"), jobs[0] if jobs else {})
        pod_meta = node.get("template", {}).get("spec", {}).get("template", {}).get("metadata", {})
        runtimes[rt["metadata"]["name"]] = pod_meta.get("annotations", {}).get(TOPOLOGY_ANNOTATIONS["required"])
    default = "torch-distributed" if "torch-distributed" in runtimes else min(runtimes, default="")
    return StackFacts(
        resource,
        teams,
        pools,
        quotas,
        cohorts,
        flavor_pools,
        {p["metadata"]["name"]: int(p["value"]) for p in _of_kind(objects, "WorkloadPriorityClass")},
        runtimes,
        default,
        replicated,
        objects,
    )
