"""What the platform's own objects in a team namespace count in a ResourceQuota (`hard` key → amount). A team's
ResourceQuota is what the admin gave the team's jobs; the platform raises it by these shares
(`tenancy/limits.py`), or a job sized to the quota is admitted by Kueue and then refused its last pod."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from trainer_infra.core.quantity import quantity


def pod_share(resources: Mapping[str, Mapping[str, str]]) -> dict[str, Decimal]:
    """One pod's container `resources` (`requests`/`limits` → resource → quantity) as a quota counts them: a bare
    resource name counts requests."""
    share: dict[str, Decimal] = {}
    for kind, amounts in resources.items():
        for resource, amount in amounts.items():
            share[f"{kind}.{resource}"] = quantity(amount)
            if kind == "requests":
                share[resource] = quantity(amount)
    return share


def deployment_share(history: int) -> dict[str, Decimal]:
    """A one-replica Deployment that recreates its pod (never two at once) and keeps `history` old ReplicaSets."""
    counts = {"pods": 1, "count/pods": 1, "count/deployments.apps": 1, "count/replicasets.apps": 1 + history}
    return {key: Decimal(n) for key, n in counts.items()}


def add_shares(*shares: Mapping[str, Decimal]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for share in shares:
        for key, amount in share.items():
            total[key] = total.get(key, Decimal(0)) + amount
    return total
