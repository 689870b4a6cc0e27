"""karpenter backend: a Karpenter `NodePool` (karpenter.sh/v1), plus an `EC2NodeClass`
(karpenter.k8s.aws/v1) unless an existing node class is named.

Owns: those two objects. Never touches: Karpenter itself (install it separately), the nodes Karpenter
launches (Karpenter owns them), other NodePools. Topology labels are AWS's
(`topology.k8s.aws/network-node-layer-*`, set by Karpenter from EC2 instance topology), so only those,
the zone and the hostname are accepted as levels.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.types import DnsSubdomain
from trainer_infra.manifests import meta
from trainer_infra.nodepools.backend import BackendDefaults
from trainer_infra.nodepools.labels import HOSTNAME
from trainer_infra.nodepools.model import NodePool, ResolvedPool

EKS_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{i}" for i in range(1, 5))
DEFAULT_EKS_TOPOLOGY = (*EKS_LAYERS[:3], HOSTNAME)
PROVIDED_LEVELS = frozenset({*EKS_LAYERS, "topology.kubernetes.io/zone", HOSTNAME})


class EC2NodeClassConfig(StrictModel):
    role: str = Field(description="IAM role name of the nodes.")
    ami_alias: str = Field(default="al2023@latest", description="amiSelectorTerms alias.")
    subnet_tags: dict[str, str] = Field(min_length=1)
    security_group_tags: dict[str, str] = Field(min_length=1)


class KarpenterPool(StrictModel):
    instance_types: list[str] = Field(min_length=1, description="EC2 instance types, e.g. p5.48xlarge.")
    node_class: EC2NodeClassConfig | None = Field(
        default=None, description="Create an EC2NodeClass named after the pool."
    )
    node_class_name: DnsSubdomain | None = Field(default=None, description="Or use an existing EC2NodeClass.")
    consolidate_after: str = Field(default="10m", pattern=r"^(\d+(s|m|h))+$|^Never$")


# NodePool template label domains Karpenter's CRD rejects (karpenter.sh_nodepools.yaml CEL rules).
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")


def karpenter_objects(pool: ResolvedPool) -> list[ManagedObject]:
    kp: KarpenterPool = pool.settings
    class_name = kp.node_class_name or pool.name
    objects = []
    if kp.node_class is not None:
        nc = kp.node_class
        objects.append(
            ManagedObject(
                {
                    "apiVersion": "karpenter.k8s.aws/v1",
                    "kind": "EC2NodeClass",
                    "metadata": meta.metadata(class_name),
                    "spec": {
                        "role": nc.role,
                        "amiSelectorTerms": [{"alias": nc.ami_alias}],
                        "subnetSelectorTerms": [{"tags": dict(sorted(nc.subnet_tags.items()))}],
                        "securityGroupSelectorTerms": [{"tags": dict(sorted(nc.security_group_tags.items()))}],
                    },
                }
            )
        )
    requirements: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(kp.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [pool.config.capacity_type]},
    ]
    limits = {k: format_amount(k, v) for k, v in sorted(pool.capacity.items())}
    objects.append(
        ManagedObject(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": meta.metadata(pool.name),
                "spec": {
                    "template": {
                        "metadata": {"labels": pool.node_labels},
                        "spec": {
                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class_name},
                            "requirements": requirements,
                            "taints": [t.as_k8s() for t in pool.taints],
                        },
                    },
                    # Karpenter stops launching at these totals: the pool's `size.max` nodes.
                    "limits": limits,
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": kp.consolidate_after},
                },
            }
        )
    )
    return objects


class KarpenterBackend(BackendDefaults):
    """Karpenter launches the nodes from EC2 instance types; the pool scales from zero to `size.max`."""

    name = "karpenter"
    settings_model = KarpenterPool
    settings_hint = "karpenter: {instanceTypes: [...], nodeClass: {...}}"

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        return DEFAULT_EKS_TOPOLOGY

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        return PROVIDED_LEVELS

    def node_count(self, pool: NodePool, settings: Any) -> int:
        return pool.size.max or 0

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        kp: KarpenterPool = pool.settings
        at, size = pool.at, pool.config.size
        issues = []
        for key in pool.config.labels:
            domain = key.split("/")[0] if "/" in key else ""
            if domain.endswith(RESTRICTED_DOMAINS):
                issues.append(
                    ConfigIssue(f"{at}.labels.{key}", "Karpenter refuses NodePool labels in this domain", domain)
                )
        if size.max is None:
            issues.append(ConfigIssue(f"{at}.size.max", "required for karpenter pools (becomes the NodePool limits)"))
        if size.min or size.count is not None:
            issues.append(ConfigIssue(f"{at}.size", "karpenter pools scale from zero: set only max"))
        if (kp.node_class is None) == (kp.node_class_name is None):
            issues.append(ConfigIssue(f"{at}.karpenter", "set exactly one of nodeClass, nodeClassName"))
        return issues

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return karpenter_objects(pool)


BACKEND = KarpenterBackend()
