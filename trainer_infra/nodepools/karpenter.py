"""karpenter backend: a Karpenter `NodePool` (karpenter.sh/v1), plus an `EC2NodeClass` (karpenter.k8s.aws/v1)
unless an existing node class is named. Shapes checked against the CRDs of sigs.k8s.io/karpenter v1.15.0 and
github.com/aws/karpenter-provider-aws v1.15.2 (the CRD tests read them from their Go modules).

Owns: those two objects (the node class carries the kubelet's per-pod PID limit). Never touches: Karpenter itself
(install it separately), the nodes Karpenter launches (Karpenter owns them), other NodePools, the capacity reservations
and placement groups it selects.

Reserved capacity (On-Demand Capacity Reservations and Capacity Blocks for ML) is only launched into through the
node class's `capacityReservationSelectorTerms`: a `reserved` NodePool without them can launch nothing, so it
is refused. EFA: Karpenter attaches the instance type's maximum EFA interfaces when the pending pods request
`vpc.amazonaws.com/efa` (v1.15.2 pkg/providers/instance/instance.go `getEFACountForInstance`); the backend checks
every instance type has them. Topology levels are the labels these nodes really carry (nodepools/aws.py).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.quantity import format_amount
from trainer_infra.core.types import DnsSubdomain
from trainer_infra.core.upstream import karpenter, kubernetes
from trainer_infra.manifests import meta
from trainer_infra.nodepools import aws, pids
from trainer_infra.nodepools.backend import BackendDefaults
from trainer_infra.nodepools.disk import DiskRule, NodeDisk
from trainer_infra.nodepools.labels import HOSTNAME, ZONE
from trainer_infra.nodepools.model import NodePool, ResolvedPool

INSTANCE_TYPE = kubernetes.INSTANCE_TYPE_LABEL
CAPACITY_TYPE = karpenter.CAPACITY_TYPE_LABEL
RESERVATION_ID = karpenter.RESERVATION_ID_LABEL
RESERVATION_TYPE = karpenter.RESERVATION_TYPE_LABEL
PLACEMENT_GROUP_ID = karpenter.PLACEMENT_GROUP_ID_LABEL
CAPACITY_BLOCK = "capacity-block"  # the value of RESERVATION_TYPE for Capacity Blocks for ML
PLACEMENT_GROUP_ID_PATTERN = r"^pg-[0-9a-z]+$"

DEFAULT_EKS_TOPOLOGY = (*aws.NETWORK_LAYERS[:3], HOSTNAME)
PROVIDED_LEVELS = frozenset({*aws.NETWORK_LAYERS, ZONE, aws.ZONE_ID, HOSTNAME, RESERVATION_ID, PLACEMENT_GROUP_ID})


class ReservationTerm(StrictModel):
    """One `capacityReservationSelectorTerms` entry: a reservation ID, or tags (of another account's reservations
    with `ownerId`)."""

    id: str | None = Field(default=None, pattern=r"^cr-[0-9a-z]+$", description="e.g. cr-0123456789abcdef0.")
    tags: dict[str, str] | None = Field(default=None, min_length=1, max_length=20)
    owner_id: str | None = Field(default=None, pattern=r"^[0-9]{12}$", description="AWS account of tagged ones.")

    @model_validator(mode="after")
    def _one_selector(self) -> ReservationTerm:
        if (self.id is None) == (self.tags is None):
            raise ValueError("set exactly one of id, tags")
        if self.id is not None and self.owner_id is not None:
            raise ValueError("ownerId goes with tags, not with id")
        if self.tags is not None and any(not k or not v for k, v in self.tags.items()):
            raise ValueError("tags: empty keys or values select nothing")
        return self

    def as_k8s(self) -> dict[str, Any]:
        if self.id is not None:
            return {"id": self.id}
        term: dict[str, Any] = {"tags": dict(sorted((self.tags or {}).items()))}
        if self.owner_id is not None:
            term["ownerID"] = self.owner_id
        return term


class EC2NodeClassConfig(StrictModel):
    role: str = Field(min_length=1, description="IAM role name of the nodes.")
    ami_alias: str = Field(
        default="al2023@latest",
        pattern=r"^(al2|al2023|bottlerocket)@.+$",
        max_length=30,
        description="amiSelectorTerms alias, family@version (pin a version in production).",
    )
    subnet_tags: dict[str, str] = Field(min_length=1)
    security_group_tags: dict[str, str] = Field(min_length=1)
    capacity_reservations: list[ReservationTerm] = Field(
        default_factory=list,
        max_length=30,
        description="capacityReservationSelectorTerms: the reservations (ODCRs, Capacity Blocks) a reserved pool "
        "launches into. Required for capacityType reserved.",
    )
    placement_group: str | None = Field(
        default=None,
        min_length=1,
        description="An existing placement group (name, or pg- ID) the nodes launch into: placementGroupSelector.",
    )


class KarpenterPool(StrictModel):
    instance_types: list[str] = Field(min_length=1, description="EC2 instance types, e.g. p5.48xlarge.")
    node_class: EC2NodeClassConfig | None = Field(
        default=None, description="Create an EC2NodeClass named after the pool."
    )
    node_class_name: DnsSubdomain | None = Field(default=None, description="Or use an existing EC2NodeClass.")
    consolidate_after: str = Field(default="10m", pattern=r"^(\d+(s|m|h))+$|^Never$")
    efa: bool = Field(
        default=False,
        description=f"Nodes with EFA interfaces (pods request {aws.EFA_RESOURCE}): every instance type must have "
        "them; the EFA device plugin is installed.",
    )
    capacity_block: bool = Field(
        default=False, description="Launch only into Capacity Blocks for ML among the selected reservations."
    )


RESTRICTED_DOMAINS = karpenter.RESTRICTED_LABEL_DOMAINS


#: Bottlerocket's OS volume, as Karpenter sizes it when it renders the defaults itself (bottlerocket.go
#: `DefaultBlockDeviceMappings`: "at least as large as the AMI's root snapshot"). Naming any mapping replaces all of
#: Karpenter's defaults (amifamily/resolver.go), so it is rendered too.
BOTTLEROCKET_OS = ("/dev/xvda", "6Gi")


def _ebs(size: str) -> dict[str, Any]:
    """gp3 and encrypted, as Karpenter's own default volume (amifamily/resolver.go `DefaultEBS`)."""
    return {"volumeSize": size, "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}


def block_device_mappings(ami_alias: str, disk: NodeDisk) -> list[dict[str, Any]]:
    """The node's disk as `blockDeviceMappings`: the volume the kubelet's root dir lives on is `rootVolume`, the
    one Karpenter takes the node's ephemeral-storage capacity from (instancetype/types.go `ephemeralStorage`)."""
    family = ami_alias.split("@", 1)[0]
    pods = {"deviceName": aws.EPHEMERAL_DEVICE[family], "rootVolume": True, "ebs": _ebs(disk.quantity)}
    if family == "bottlerocket":
        device, size = BOTTLEROCKET_OS
        return [{"deviceName": device, "ebs": _ebs(size)}, pods]
    return [pods]


def _node_class(name: str, nc: EC2NodeClassConfig, pod_pids_limit: int, disk: NodeDisk | None) -> ManagedObject:
    spec: dict[str, Any] = {
        "role": nc.role,
        "amiSelectorTerms": [{"alias": nc.ami_alias}],
        "subnetSelectorTerms": [{"tags": dict(sorted(nc.subnet_tags.items()))}],
        "securityGroupSelectorTerms": [{"tags": dict(sorted(nc.security_group_tags.items()))}],
        # spec.kubelet takes any upstream KubeletConfiguration field and passes the ones Karpenter does not read
        # to the AL2023 nodeadm NodeConfig unchanged (v1.15.2 pkg/apis/v1/ec2nodeclass.go `Kubelet`,
        # pkg/providers/amifamily/bootstrap/nodeadm.go `generateInlineKubeletConfiguration`)
        "kubelet": {pids.KUBELET_KEY: pod_pids_limit},
    }
    if nc.ami_alias.startswith("bottlerocket@"):
        # Bottlerocket's bootstrap reads only the fields it knows from spec.kubelet, podPidsLimit not among them;
        # it merges its settings into the node class's user data instead (bootstrap/bottlerocket.go `Script`)
        spec["userData"] = pids.bottlerocket_user_data(pod_pids_limit)
    if disk is not None:  # always, for a node class of our own (disk_rule)
        spec["blockDeviceMappings"] = block_device_mappings(nc.ami_alias, disk)
    if nc.capacity_reservations:
        spec["capacityReservationSelectorTerms"] = [t.as_k8s() for t in nc.capacity_reservations]
    if nc.placement_group is not None:
        key = "id" if aws_id(nc.placement_group) else "name"
        spec["placementGroupSelector"] = {key: nc.placement_group}
    return ManagedObject(
        {
            "apiVersion": karpenter.EC2_NODECLASS_API,
            "kind": "EC2NodeClass",
            "metadata": meta.metadata(name),
            "spec": spec,
        }
    )


def aws_id(value: str) -> bool:
    return re.match(PLACEMENT_GROUP_ID_PATTERN, value) is not None


def karpenter_objects(pool: ResolvedPool) -> list[ManagedObject]:
    kp: KarpenterPool = pool.settings
    class_name = kp.node_class_name or pool.name
    limit = pool.config.pod_pids_limit
    objects = [] if kp.node_class is None else [_node_class(class_name, kp.node_class, limit, pool.disk)]
    requirements: list[dict[str, Any]] = [
        {"key": INSTANCE_TYPE, "operator": "In", "values": list(kp.instance_types)},
        {"key": CAPACITY_TYPE, "operator": "In", "values": [pool.config.capacity_type]},
    ]
    if kp.capacity_block:
        requirements.append({"key": RESERVATION_TYPE, "operator": "In", "values": [CAPACITY_BLOCK]})
    limits = _limits(pool)
    objects.append(
        ManagedObject(
            {
                "apiVersion": karpenter.NODEPOOL_API,
                "kind": "NodePool",
                "metadata": meta.metadata(pool.name),
                "spec": {
                    "template": {
                        "metadata": {"labels": pool.node_labels},
                        "spec": {
                            "nodeClassRef": {"group": karpenter.AWS_GROUP, "kind": "EC2NodeClass", "name": class_name},
                            "requirements": requirements,
                            "taints": [t.as_k8s() for t in pool.taints],
                        },
                    },
                    "limits": limits,
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": kp.consolidate_after},
                },
            }
        )
    )
    return objects


def _limits(pool: ResolvedPool) -> dict[str, str]:
    """Karpenter stops launching at these totals: the pool's `size.max` nodes.

    Karpenter counts a launch against the limits with the instance type's capacity, not its allocatable
    (sigs.k8s.io/karpenter v1.15.0 pkg/controllers/provisioning/scheduling/scheduler.go
    `filterByRemainingResources`, `subtractMax`), so `size.max` × the pool's allocatable CPU or memory would refuse
    the last node. A GPU node's capacity and allocatable GPUs are the same count: a GPU pool is limited on its
    accelerator alone; a pool without one on `nodes` (pkg/utils/resources `Node`)."""
    resource = pool.accelerator_resource
    if resource is not None:
        return {resource: format_amount(resource, pool.capacity[resource])}
    return {"nodes": str(pool.node_count)}


def _capacity_checks(pool: ResolvedPool) -> list[ConfigIssue]:
    """Reserved capacity launches only through the node class's reservation selector terms; reservations are
    used by nothing else."""
    kp: KarpenterPool = pool.settings
    at, capacity_type = f"{pool.at}.karpenter", pool.config.capacity_type
    terms = kp.node_class.capacity_reservations if kp.node_class else []
    example = "nodeClass: {capacityReservations: [{id: cr-0123456789abcdef0}]}"
    issues = []
    if capacity_type == "reserved" and kp.node_class is None:
        issues.append(
            ConfigIssue(
                f"{at}.nodeClassName",
                "capacityType reserved needs capacityReservationSelectorTerms the platform can see",
                f"nodeClassName: {kp.node_class_name}",
                f"declare the node class here: {example}",
            )
        )
    elif capacity_type == "reserved" and not terms:
        issues.append(
            ConfigIssue(
                f"{at}.nodeClass.capacityReservations",
                "capacityType reserved launches nothing without capacity reservation selector terms",
                "capacityType: reserved, capacityReservations: []",
                f"name the reservations: {example}",
            )
        )
    if terms and capacity_type != "reserved":
        issues.append(
            ConfigIssue(
                f"{at}.nodeClass.capacityReservations",
                f"capacity reservations are only launched into by capacityType reserved, not {capacity_type}",
                f"capacityType: {capacity_type}, capacityReservations: {len(terms)} term(s)",
                "set capacityType: reserved, or remove capacityReservations",
            )
        )
    if kp.capacity_block and capacity_type != "reserved":
        issues.append(
            ConfigIssue(
                f"{at}.capacityBlock",
                "Capacity Blocks are reserved capacity",
                f"capacityType: {capacity_type}, capacityBlock: true",
                "set capacityType: reserved and name the block in nodeClass.capacityReservations",
            )
        )
    return issues


def _efa_checks(pool: ResolvedPool) -> list[ConfigIssue]:
    kp: KarpenterPool = pool.settings
    if not kp.efa:
        return []
    return [
        ConfigIssue(
            f"{pool.at}.{KarpenterBackend.name}.instanceTypes[{kp.instance_types.index(t)}]",
            "this instance type has no EFA interfaces",
            f"efa: true, instance type {t}",
            "instance types with EFA: " + ", ".join(sorted(aws.EFA_INTERFACES)),
        )
        for t in aws.without_efa(kp.instance_types)
    ]


def topology_checks(pool: ResolvedPool, instance_types: list[str], reserved_level: bool) -> list[ConfigIssue]:
    """Levels the nodes of these instance types really carry: network layers the cloud-controller-manager sets
    for them, the reservation level only on reserved capacity."""
    issues = []
    levels = [k for k in pool.topology if k.startswith(aws.NETWORK_LAYER_PREFIX)]
    carried = aws.network_levels(instance_types)
    lacking = [k for k in levels if k not in carried]
    if lacking:
        shallow = aws.without_topology(instance_types) or [
            t for t in instance_types if aws.topology_layers(t) < len(aws.NETWORK_LAYERS)
        ]
        issues.append(
            ConfigIssue(
                f"{pool.at}.topology",
                "EC2 reports no such network layer for these instance types, so their nodes never carry it",
                f"{', '.join(lacking)} on {', '.join(shallow)}",
                "use " + ", ".join([*carried, ZONE, HOSTNAME]) if carried else f"topology: [{ZONE}, {HOSTNAME}]",
            )
        )
    if RESERVATION_ID in pool.topology and not reserved_level:
        issues.append(
            ConfigIssue(
                f"{pool.at}.topology",
                "only nodes on reserved capacity carry the reservation label",
                f"{RESERVATION_ID}, capacityType: {pool.config.capacity_type}",
                "set capacityType: reserved, or drop the level",
            )
        )
    return issues


class KarpenterBackend(BackendDefaults):
    """Karpenter launches the nodes from EC2 instance types; the pool scales from zero to `size.max`."""

    name = "karpenter"
    settings_model = KarpenterPool
    settings_hint = "karpenter: {instanceTypes: [...], nodeClass: {...}}"
    scaling_hint = (
        "Karpenter launches nodes only for pending pods, which Kueue creates after admission: set "
        "components.kueue.tas.enabled: false, or move this capacity to a fixed-size node group (eks backend)"
    )

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        return DEFAULT_EKS_TOPOLOGY

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        return PROVIDED_LEVELS

    def node_count(self, pool: NodePool, settings: Any) -> int:
        return pool.size.max or 0

    def autoscaling(self, pool: NodePool, settings: Any) -> tuple[int, int] | None:
        return (0, pool.size.max or 0)

    def extra_resources(self, pool: NodePool, settings: Any) -> dict[str, int]:
        """Karpenter attaches every EFA interface of the instance type it launches (v1.15.2
        pkg/providers/instance/instance.go `getEFACountForInstance`): the fewest among the pool's types is what
        every node offers."""
        if not isinstance(settings, KarpenterPool) or not settings.efa:
            return {}
        count = min(aws.EFA_INTERFACES.get(t, 0) for t in settings.instance_types)
        return {aws.EFA_RESOURCE: count} if count else {}

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
        if PLACEMENT_GROUP_ID in pool.topology and (kp.node_class is None or kp.node_class.placement_group is None):
            issues.append(
                ConfigIssue(
                    f"{at}.topology",
                    "only nodes launched into a placement group carry its label",
                    PLACEMENT_GROUP_ID,
                    f"set {KarpenterBackend.name}.nodeClass.placementGroup, or drop the level",
                )
            )
        reserved = pool.config.capacity_type == "reserved"
        issues += topology_checks(pool, kp.instance_types, reserved)
        return issues + _capacity_checks(pool) + _efa_checks(pool)

    def kubelet_unmanaged(self, pool: ResolvedPool) -> bool:
        return pool.settings.node_class is None  # an existing EC2NodeClass (nodeClassName) is not ours to change

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        # Karpenter computes its nodes' allocatable by the EKS AMIs' rule (nodepools/disk.py)
        return "eks" if isinstance(settings, KarpenterPool) and settings.node_class is not None else None

    def default_disk(self, pool: NodePool, settings: Any) -> str | None:
        # someone else's EC2NodeClass: the provider's default volume unless it sets blockDeviceMappings
        return karpenter.DEFAULT_NODE_DISK

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return karpenter_objects(pool)


BACKEND = KarpenterBackend()
