"""eks backend: one EKS managed node group (`aws.eks.NodeGroup`) per pool, in the cluster named by `cloud.eks`, with
the launch template (`aws.ec2.LaunchTemplate`) and cluster placement group (`aws.ec2.PlacementGroup`) it needs.

Owns: the node group (instance type, accelerated AMI type, labels, taints, min/max size), its launch template (the
kubelet's per-pod PID limit as user data; EFA interfaces, placement group, capacity reservation or Capacity Block where
the pool needs them) and its cluster placement group. Never touches: the cluster, its VPC, subnets, security groups and
node IAM role (the cluster stack's), the capacity reservations themselves, other node groups. The node shape comes from
the machine table (machine_types/eks.yaml).

Facts, with their sources:
- Capacity Blocks for ML need `capacity_type: CAPACITY_BLOCK` and a launch template with
  `instance_market_options.market_type: capacity-block`, the reservation as `capacity_reservation_target` and the
  instance type (EKS user guide, capacity-blocks-mng: "If the capacity type isn't set to CAPACITY_BLOCK or any of
  the other above required launch template values are missing, then the create request will be rejected").
  An On-Demand Capacity Reservation is targeted the same way, with capacity type ON_DEMAND.
- EFA: one interface of type `efa` per network card, device index 0 on the first card and 1 on the others, as
  Karpenter builds them (karpenter-provider-aws v1.15.2 pkg/providers/launchtemplate/launchtemplate.go
  `generateNetworkInterfaces`); interfaces set in a launch template carry the security groups themselves.
- The EKS AL2023 NVIDIA AMIs ship the driver and container toolkit but not the NVIDIA device plugin; Bottlerocket
  NVIDIA AMIs ship it; neither ships the EFA device plugin (EKS user guide, ml-eks-optimized-ami). The platform
  installs what is missing (components/device_plugins.py).
- Node labels: EKS adds `eks.amazonaws.com/nodegroup` and `eks.amazonaws.com/capacityType`; the AWS
  cloud-controller-manager adds `topology.k8s.aws/network-node-layer-*` for the instance types EC2 reports a
  topology for (nodepools/aws.py), so those are the levels offered.

Replacement: the node group is protected (unless allowDataLoss) and no property is marked replace-on-change. What
the provider replaces on (REPLACED_ON, terraform-provider-aws internal/service/eks/node_group.go `ForceNew`) is set
only from facts that cannot change without new nodes; scaling, labels, taints and the launch template version are
updated in place, as the eks tests check. `desiredSize` is left to the cluster autoscaler. A node group created
without a launch template (before every pool had one for its PID limit) is replaced to get one: EKS cannot add a
launch template to such a group (EKS user guide, launch-templates) and `launch_template.id` is ForceNew.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import Field, field_validator

from trainer_infra.core.cloud import AWS, CloudOptions, CloudResource, ResourceOutput, sdk_value
from trainer_infra.core.errors import ConfigIssue, did_you_mean
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import aws as upstream_aws
from trainer_infra.core.upstream import nvidia
from trainer_infra.nodepools import aws, pids
from trainer_infra.nodepools.cloud import CloudNodeGroup, RefConfig, provider, ref, size_issues
from trainer_infra.nodepools.disk import DiskRule, NodeDisk
from trainer_infra.nodepools.labels import HOSTNAME, ZONE
from trainer_infra.nodepools.machines import Machine, machine_table
from trainer_infra.nodepools.model import NodePool, NodeShape, ResolvedPool

if TYPE_CHECKING:
    from pulumi import Input
    from pulumi_aws.ec2 import LaunchTemplate as SdkLaunchTemplate
    from pulumi_aws.ec2 import (
        LaunchTemplateBlockDeviceMappingArgsDict,
        LaunchTemplateBlockDeviceMappingEbsArgsDict,
        LaunchTemplateCapacityReservationSpecificationArgsDict,
        LaunchTemplateInstanceMarketOptionsArgsDict,
        LaunchTemplateNetworkInterfaceArgsDict,
        LaunchTemplatePlacementArgsDict,
    )
    from pulumi_aws.ec2 import PlacementGroup as SdkPlacementGroup
    from pulumi_aws.eks import NodeGroup as SdkNodeGroup
    from pulumi_aws.eks import (
        NodeGroupLaunchTemplateArgsDict,
        NodeGroupScalingConfigArgsDict,
        NodeGroupTaintArgsDict,
        NodeGroupUpdateConfigArgsDict,
    )

#: Labels EKS itself puts on managed node group nodes (EKS user guide, managed-node-groups).
NODEGROUP_LABEL = upstream_aws.NODEGROUP_LABEL
CAPACITY_TYPE_LABEL = upstream_aws.NODEGROUP_CAPACITY_TYPE_LABEL
#: The accelerated AMI types of the EKS API (Nodegroup.amiType) this backend launches GPU and Trainium nodes with.
AmiType = Literal[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
    "AL2023_x86_64_NEURON",
]
#: AMI types without the NVIDIA device plugin, and the resource each AMI family serves.
NVIDIA_PLUGIN_MISSING = frozenset({"AL2023_x86_64_NVIDIA", "AL2023_ARM_64_NVIDIA"})
AMI_RESOURCE = {"NVIDIA": nvidia.GPU, "NEURON": "aws.amazon.com/neuron"}
#: NodeGroup arguments the provider replaces the node group on (terraform-provider-aws node_group.go ForceNew).
REPLACED_ON = frozenset(
    {"ami_type", "capacity_type", "cluster_name", "disk_size", "instance_types", "node_group_name", "node_role_arn"}
    | {"node_group_name_prefix", "remote_access", "subnet_ids", "launch_template.id", "launch_template.name"}
)
EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
EC2_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
EC2_PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
CAPACITY_BLOCK_MARKET = "capacity-block"

#: A list of IDs, or one stack output holding the list.
Subnets = list[str] | RefConfig


class EksCluster(StrictModel):
    """`cloud.eks`: the EKS cluster the node groups join. Credentials come from the environment (AWS_PROFILE, …)."""

    region: str = Field(description="AWS region of the cluster, e.g. us-east-1.")
    cluster: RefConfig = Field(description="Cluster name, or {stack, output} from the cluster stack.")
    node_role_arn: RefConfig = Field(description="IAM role ARN of the nodes (the cluster stack's).")
    subnets: Subnets = Field(description="Subnet IDs of the node groups (private subnets), or a stack output.")


class EksPool(StrictModel):
    instance_type: str = Field(description="EC2 instance type, e.g. p5.48xlarge (machine_types/eks.yaml).")
    ami_type: AmiType = Field(default="AL2023_x86_64_NVIDIA", description="EKS accelerated AMI type.")
    subnets: Subnets | None = Field(
        default=None, description="Subnets of this pool (one Availability Zone for EFA, placement, reservations)."
    )
    efa: bool = Field(default=False, description="All the instance type's EFA interfaces; installs the EFA plugin.")
    security_groups: Subnets | None = Field(
        default=None,
        description="Security groups of the EFA interfaces (required with efa): the cluster security group and one "
        "that allows all traffic to and from itself, as EFA needs.",
    )
    placement_group: bool = Field(default=False, description="Launch into a new cluster placement group.")
    capacity_reservation: str | None = Field(
        default=None,
        pattern=r"^cr-[0-9a-z]+$",
        description="A capacity reservation (ODCR, or the Capacity Block with capacityBlock) the nodes launch into.",
    )
    capacity_block: bool = Field(default=False, description="capacityReservation is a Capacity Block for ML.")

    @field_validator("instance_type")
    @classmethod
    def _known(cls, value: str) -> str:
        """Refused here, not in `checks`: without its row the pool has no node shape to resolve."""
        table = machine_table("eks")
        if table.get(value) is None:
            hint = did_you_mean(value, table.names()) or "known: " + ", ".join(table.names())
            raise ValueError(f"{value} is not in the EKS machine table (machine_types/eks.yaml); {hint}")
        return value


class EksNodeGroupArgs(TypedDict, total=False):
    """The keyword arguments of `pulumi_aws.eks.NodeGroup` this backend sets (mypy checks them below)."""

    cluster_name: Input[str]
    node_group_name: str
    node_role_arn: Input[str]
    subnet_ids: Input[list[Input[str]]]
    scaling_config: NodeGroupScalingConfigArgsDict
    ami_type: str
    capacity_type: str
    instance_types: list[str]
    labels: dict[str, str]
    taints: list[NodeGroupTaintArgsDict]
    launch_template: NodeGroupLaunchTemplateArgsDict
    update_config: NodeGroupUpdateConfigArgsDict


class EksLaunchTemplateArgs(TypedDict, total=False):
    """The keyword arguments of `pulumi_aws.ec2.LaunchTemplate` this backend sets."""

    instance_type: str
    network_interfaces: list[LaunchTemplateNetworkInterfaceArgsDict]
    placement: LaunchTemplatePlacementArgsDict
    capacity_reservation_specification: LaunchTemplateCapacityReservationSpecificationArgsDict
    instance_market_options: LaunchTemplateInstanceMarketOptionsArgsDict
    update_default_version: bool
    user_data: str
    block_device_mappings: list[LaunchTemplateBlockDeviceMappingArgsDict]


class EksPlacementGroupArgs(TypedDict):
    strategy: str


if TYPE_CHECKING:

    def _sdk_accepts(
        group: EksNodeGroupArgs, template: EksLaunchTemplateArgs, placement: EksPlacementGroupArgs
    ) -> tuple[SdkNodeGroup, SdkLaunchTemplate, SdkPlacementGroup]:
        """Never called: mypy checks every argument against the SDK's own signatures."""
        return SdkNodeGroup("", **group), SdkLaunchTemplate("", **template), SdkPlacementGroup("", **placement)


def _machine(settings: EksPool) -> Machine | None:
    return machine_table("eks").get(settings.instance_type)


def _subnets(value: Subnets) -> Any:
    return [ref(s) for s in value] if isinstance(value, list) else ref(value)


def capacity_type(pool: ResolvedPool, settings: EksPool) -> str:
    if settings.capacity_block:
        return "CAPACITY_BLOCK"
    return "SPOT" if pool.config.capacity_type == "spot" else "ON_DEMAND"


def efa_interfaces(count: int, security_groups: Any) -> list[LaunchTemplateNetworkInterfaceArgsDict]:
    return [
        {
            "network_card_index": card,
            "device_index": 0 if card == 0 else 1,
            "interface_type": "efa",
            "delete_on_termination": "true",
            "security_groups": security_groups,
        }
        for card in range(count)
    ]


def user_data(pool: ResolvedPool, settings: EksPool) -> str:
    """The kubelet settings the node group's nodes need beyond EKS's own (the per-pod PID limit), base64 as the
    launch template takes it. EKS merges it with the bootstrap user data it adds itself (EKS user guide,
    launch-templates, "Amazon EC2 user data"): a MIME multi-part nodeadm NodeConfig on AL2023 AMIs, TOML settings on
    Bottlerocket AMIs."""
    limit = pool.config.pod_pids_limit
    text = pids.bottlerocket_user_data(limit) if settings.ami_type.startswith("BOTTLEROCKET") else None
    return base64.b64encode((text or pids.nodeadm_user_data(limit)).encode()).decode()


def block_device_mappings(settings: EksPool, disk: NodeDisk) -> list[LaunchTemplateBlockDeviceMappingArgsDict]:
    """The volume pods' ephemeral storage and the images live on: the AL2023 root volume, Bottlerocket's data
    volume (nodepools/aws.py EPHEMERAL_DEVICE). The
    AMI's other volumes keep the AMI's mapping; gp3 and encrypted, as EKS's own default volume."""
    device = aws.EPHEMERAL_DEVICE["bottlerocket" if settings.ami_type.startswith("BOTTLEROCKET") else "al2023"]
    ebs: LaunchTemplateBlockDeviceMappingEbsArgsDict = {
        "volume_size": disk.size_gib,
        "volume_type": "gp3",
        "encrypted": "true",
        "delete_on_termination": "true",
    }
    return [{"device_name": device, "ebs": ebs}]


def launch_template_args(pool: ResolvedPool, settings: EksPool, cluster: EksCluster) -> EksLaunchTemplateArgs:
    args: EksLaunchTemplateArgs = {"update_default_version": True, "user_data": user_data(pool, settings)}
    if pool.disk is not None:
        # with a launch template the node group's own disk_size is refused (EKS API CreateNodegroup, diskSize)
        args["block_device_mappings"] = block_device_mappings(settings, pool.disk)
    machine = _machine(settings)
    if settings.efa and machine is not None and settings.security_groups is not None:
        security_groups = sdk_value(_subnets(settings.security_groups))
        args["network_interfaces"] = efa_interfaces(aws.EFA_INTERFACES[machine.name], security_groups)
    if settings.placement_group:
        args["placement"] = {"group_name": sdk_value(ResourceOutput(f"{pool.name}-placement", "name"))}
    if settings.capacity_reservation is not None:
        args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": settings.capacity_reservation}
        }
    if settings.capacity_block:
        args["instance_market_options"] = {"market_type": CAPACITY_BLOCK_MARKET}
        args["instance_type"] = settings.instance_type  # required in the template for Capacity Blocks
    return args


def node_group_args(pool: ResolvedPool, cluster: EksCluster) -> EksNodeGroupArgs:
    settings: EksPool = pool.settings
    low, high = pool.autoscaling or (pool.node_count, pool.node_count)
    args: EksNodeGroupArgs = {
        "cluster_name": sdk_value(ref(cluster.cluster)),
        "node_group_name": pool.name,
        "node_role_arn": sdk_value(ref(cluster.node_role_arn)),
        "subnet_ids": sdk_value(_subnets(settings.subnets if settings.subnets is not None else cluster.subnets)),
        "scaling_config": {"min_size": low, "max_size": high, "desired_size": low},
        "ami_type": settings.ami_type,
        "capacity_type": capacity_type(pool, settings),
        "labels": dict(pool.node_labels),
        "taints": [{"key": t.key, "value": t.value, "effect": EFFECTS[t.effect]} for t in pool.taints],
        # one node at a time: a GPU node group's update drains nodes under running jobs
        "update_config": {"max_unavailable": 1},
    }
    if not settings.capacity_block:  # a Capacity Block names its instance type in the launch template
        args["instance_types"] = [settings.instance_type]
    template = f"{pool.name}-launch-template"
    args["launch_template"] = {
        "id": sdk_value(ResourceOutput(template, "id")),
        # the template's latest version: a template change rolls the nodes (an in-place node group update)
        "version": sdk_value(ResourceOutput(template, "latest_version", as_string=True)),
    }
    return args


def eks_resources(pool: ResolvedPool, cluster: EksCluster) -> list[CloudResource]:
    settings: EksPool = pool.settings
    aws_provider = provider(AWS, "eks", {"region": cluster.region})
    out: list[CloudResource] = []

    def add(module: str, resource: str, token: str, name: str, args: Any, options: CloudOptions) -> None:
        out.append(CloudResource(aws_provider, module, resource, token, name, args, options))

    if settings.placement_group:
        placement: EksPlacementGroupArgs = {"strategy": "cluster"}
        add("ec2", "PlacementGroup", EC2_PLACEMENT_GROUP, f"{pool.name}-placement", placement, CloudOptions())
    template = launch_template_args(pool, settings, cluster)
    add("ec2", "LaunchTemplate", EC2_LAUNCH_TEMPLATE, f"{pool.name}-launch-template", template, CloudOptions())
    # the cluster autoscaler (or EKS's Capacity Block scale-down) moves desiredSize: `pulumi up` leaves it alone
    options = CloudOptions(ignore_changes=("scalingConfig.desiredSize",))
    add("eks", "NodeGroup", EKS_NODE_GROUP, pool.name, node_group_args(pool, cluster), options)
    return out


def _single_zone(settings: EksPool, at: str) -> list[ConfigIssue]:
    needs = [n for n, on in (("efa", settings.efa), ("placementGroup", settings.placement_group)) if on]
    needs += ["capacityReservation"] if settings.capacity_reservation else []
    if needs and isinstance(settings.subnets, list) and len(settings.subnets) > 1:
        return [
            ConfigIssue(
                f"{at}.subnets",
                f"{', '.join(needs)} keep the nodes in one Availability Zone",
                f"{len(settings.subnets)} subnets",
                "give the one subnet of the reservation's or placement group's zone",
            )
        ]
    if needs and settings.subnets is None:
        return [
            ConfigIssue(
                f"{at}.subnets",
                f"{', '.join(needs)} keep the nodes in one Availability Zone: the cluster's subnets span several",
                None,
                "subnets: [subnet-…] (the reservation's or placement group's zone)",
            )
        ]
    return []


def _capacity(pool: ResolvedPool, settings: EksPool, at: str) -> list[ConfigIssue]:
    capacity = pool.config.capacity_type
    issues = []
    if capacity == "reserved" and settings.capacity_reservation is None:
        issues.append(
            ConfigIssue(
                f"{at}.capacityReservation",
                "capacityType reserved needs the reservation the nodes launch into",
                "capacityType: reserved, capacityReservation: null",
                "capacityReservation: cr-0123456789abcdef0 (with capacityBlock: true for a Capacity Block)",
            )
        )
    if settings.capacity_reservation is not None and capacity != "reserved":
        issues.append(
            ConfigIssue(
                f"{at}.capacityReservation",
                f"a capacity reservation is launched into by capacityType reserved, not {capacity}",
                f"capacityType: {capacity}, capacityReservation: {settings.capacity_reservation}",
                "set capacityType: reserved, or remove capacityReservation",
            )
        )
    if settings.capacity_block and settings.capacity_reservation is None:
        issues.append(
            ConfigIssue(
                f"{at}.capacityBlock", "a Capacity Block is named by its reservation ID", "capacityReservation: null"
            )
        )
    return issues


class EksBackend(CloudNodeGroup):
    """EKS managed node groups from an instance type; fixed `size.count` or `size.min`..`size.max`."""

    name = "eks"
    settings_model = EksPool
    settings_hint = "eks: {instanceType: p5.48xlarge}"
    cluster_model = EksCluster

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        layers = aws.network_levels([settings.instance_type]) if isinstance(settings, EksPool) else ()
        return (*layers[:3], HOSTNAME) if layers else (ZONE, HOSTNAME)

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        layers = aws.network_levels([settings.instance_type]) if isinstance(settings, EksPool) else ()
        return frozenset({*layers, ZONE, aws.ZONE_ID, HOSTNAME})

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        return "eks"

    def shape(self, pool: NodePool, settings: Any) -> NodeShape | None:
        machine = _machine(settings) if isinstance(settings, EksPool) else None
        return machine.shape if machine is not None else None

    def extra_resources(self, pool: NodePool, settings: Any) -> dict[str, int]:
        """The launch template attaches every EFA interface of the type; the EFA device plugin advertises them."""
        if not isinstance(settings, EksPool) or not settings.efa:
            return {}
        count = aws.EFA_INTERFACES.get(settings.instance_type, 0)
        return {aws.EFA_RESOURCE: count} if count else {}

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        settings: EksPool = pool.settings
        at, size = f"{pool.at}.eks", pool.config.size
        table = machine_table("eks")
        machine = table.get(settings.instance_type)
        issues = size_issues(pool)
        if not issues and (size.max if size.max is not None else size.count or 0) < 1:
            issues.append(ConfigIssue(f"{pool.at}.size", "a managed node group holds at least one node at most", "0"))
        if machine is not None and settings.efa and not aws.EFA_INTERFACES.get(machine.name):
            issues.append(
                ConfigIssue(
                    f"{at}.efa",
                    "this instance type has no EFA interfaces",
                    f"efa: true, instanceType: {settings.instance_type}",
                    "EFA types: " + ", ".join(n for n in table.names() if aws.EFA_INTERFACES.get(n)),
                )
            )
        if settings.efa and settings.security_groups is None:
            issues.append(
                ConfigIssue(
                    f"{at}.securityGroups",
                    "EFA interfaces set in a launch template carry their own security groups",
                    "efa: true, securityGroups: null",
                    "the cluster security group and one allowing all traffic within itself, or {stack, output}",
                )
            )
        gpu = machine.facts.gpu if machine else None
        family = settings.ami_type.rsplit("_", 1)[-1]
        if gpu is not None and gpu.resource != AMI_RESOURCE[family]:
            issues.append(
                ConfigIssue(
                    f"{at}.amiType",
                    f"this AMI serves {AMI_RESOURCE[family]}, the instance type's accelerator is {gpu.resource}",
                    f"amiType: {settings.ami_type}, instanceType: {settings.instance_type}",
                    "AL2023_x86_64_NEURON for Trainium/Inferentia, an *_NVIDIA AMI for NVIDIA GPUs",
                )
            )
        return issues + _capacity(pool, settings, at) + _single_zone(settings, at)

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return []  # the node group is a cloud resource; its nodes are EKS's

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        return eks_resources(pool, cluster)


BACKEND = EksBackend()
