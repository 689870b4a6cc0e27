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
        "apiVersion": "kueue.x-k8s.io/v1beta2",
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


def static_partitions(objects: list[Obj]) -> list[Obj]:
    """Each team's ClusterQueue keeps its nominal quota and nothing else: no cohort (no borrowing, no
    lending, no reclaim), no fair sharing."""
    out: list[Obj] = []
    for obj in objects:
        if obj.get("kind") == "Cohort":
            continue
        if obj.get("kind") == "ClusterQueue":
            obj = copy.deepcopy(obj)
            spec = obj["spec"]
            for key in ("cohortName", "cohort", "fairSharing"):
                spec.pop(key, None)
            spec.pop("preemption", None)
            spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
            for group in spec.get("resourceGroups", []):
                for flavor in group["flavors"]:
                    for res in flavor["resources"]:
                        res.pop("borrowingLimit", None)
                        res.pop("lendingLimit", None)
        out.append(obj)
    return out
