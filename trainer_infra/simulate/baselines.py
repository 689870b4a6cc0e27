"""The two baselines `make bench-scheduling` compares the stack's derived queues with, as rewrites of the
render's objects: one flat FIFO ClusterQueue with the whole capacity, and static per-team partitions."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

from trainer_infra.core.quantity import format_quantity, quantity

Obj = dict[str, Any]
FLAT = "flat"


def _queues(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if o.get("kind") == "ClusterQueue"]


def _kueue_api(queues: list[Obj]) -> str:
    """The Kueue API version the render writes (its pinned release's, from the matrix): the baselines' too."""
    if not queues:
        raise ValueError("the render has no ClusterQueue to build a baseline from")
    return str(queues[0]["apiVersion"])


def flat_fifo(objects: list[Obj]) -> list[Obj]:
    """Every ClusterQueue and Cohort replaced by one ClusterQueue holding the sum of their nominal quotas,
    first come first served, no preemption; every team's LocalQueue points to it."""
    queues = _queues(objects)
    totals: dict[str, dict[str, Decimal]] = {}
    covered: list[str] = []
    for cq in queues:
        for group in cq["spec"].get("resourceGroups", []):
            covered += [r for r in group["coveredResources"] if r not in covered]
            for flavor in group["flavors"]:
                for res in flavor["resources"]:
                    slot = totals.setdefault(flavor["name"], {})
                    slot[res["name"]] = slot.get(res["name"], Decimal(0)) + quantity(str(res["nominalQuota"]))
    flat = {
        "apiVersion": _kueue_api(queues),
        "kind": "ClusterQueue",
        "metadata": {"name": FLAT},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": covered,
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": r, "nominalQuota": format_quantity(v, binary=r == "memory")}
                                for r, v in sorted(res.items())
                            ],
                        }
                        for flavor, res in sorted(totals.items())
                    ],
                }
            ],
        },
    }
    out: list[Obj] = []
    for obj in objects:
        if obj.get("kind") in ("ClusterQueue", "Cohort"):
            continue
        if obj.get("kind") == "LocalQueue":
            obj = copy.deepcopy(obj)
            obj["spec"]["clusterQueue"] = FLAT
        out.append(obj)
    return [*out, flat]


PARTITIONS = "partitions"


def static_partitions(objects: list[Obj]) -> list[Obj]:
    """Each team's ClusterQueue keeps its nominal quota and nothing else: no borrowing, no lending, no
    reclaim, no fair sharing.

    The queues still share one Cohort, with every borrowing and lending limit at 0, which is a static
    partition in quota. Kueue 0.19.2 retries a pending workload that did not fit only when a workload of the
    same ClusterQueue, or of its cohort tree, ends (`QueueAssociatedInadmissibleWorkloadsAfter`). Team queues
    without a cohort share the TAS nodes but never hear of each other's finished jobs: in the first 2,000-job
    run, speech's 4-node jobs stayed pending on empty nodes after speech's last job ended."""
    out: list[Obj] = []
    for obj in objects:
        if obj.get("kind") == "Cohort":
            continue
        if obj.get("kind") == "ClusterQueue":
            obj = copy.deepcopy(obj)
            spec = obj["spec"]
            for key in ("cohort", "fairSharing", "preemption"):
                spec.pop(key, None)
            spec["cohortName"] = PARTITIONS
            spec["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
            for group in spec.get("resourceGroups", []):
                for flavor in group["flavors"]:
                    for res in flavor["resources"]:
                        res["borrowingLimit"] = 0
                        res["lendingLimit"] = 0
        out.append(obj)
    api = _kueue_api(_queues(objects))
    cohort = {"apiVersion": api, "kind": "Cohort", "metadata": {"name": PARTITIONS}, "spec": {}}
    return [*out, cohort]
