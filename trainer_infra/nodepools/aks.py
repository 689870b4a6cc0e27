"""aks backend: one AKS agent pool (`azure-native` `containerservice.AgentPool`) per pool, in the cluster named by
`cloud.aks`.

Owns: the agent pool (GPU VM size, labels, taints, count or autoscaling limits, Spot, capacity reservation group, GPU
driver installation, max pods, the kubelet's per-pod PID limit). Never touches: the managed cluster, its VNet,
identities and role assignments (the cluster stack's), other agent pools. The node shape comes from the machine table
(machine_types/aks.yaml) with the AKS 1.29+ reservation rule; `maxPods` is set from the table so that rule is the one
that applies.

Topology: AKS nodes carry no physical-topology labels (https://learn.microsoft.com/azure/aks/use-labels lists what
AKS sets: the zone, the agent pool, the node's own labels), so the levels are `topology.kubernetes.io/zone` and
`kubernetes.io/hostname`; the default is the hostname alone.

Spot: AKS taints every Spot node `kubernetes.azure.com/scalesetpriority=spot:NoSchedule`
(https://learn.microsoft.com/azure/aks/spot-node-pool), so a Spot pool must declare that taint (it then reaches
the flavor's and runtimes' tolerations like every other).

Replacement: protected (unless allowDataLoss); nothing replace-on-change; `count` is left to the autoscaler on
autoscaling pools.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from pydantic import AfterValidator, Field

from trainer_infra.core.cloud import AZURE, CloudOptions, CloudResource, sdk_value
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import azure, nvidia
from trainer_infra.nodepools.cloud import CloudNodeGroup, RefConfig, provider, ref, size_issues
from trainer_infra.nodepools.disk import DiskRule
from trainer_infra.nodepools.labels import HOSTNAME, ZONE, Taint
from trainer_infra.nodepools.machines import Machine, known_machine, machine_table
from trainer_infra.nodepools.model import NodePool, NodeShape, ResolvedPool

if TYPE_CHECKING:
    from pulumi import Input
    from pulumi_azure_native.containerservice import AgentPool as SdkAgentPool
    from pulumi_azure_native.containerservice import GPUProfileArgsDict, KubeletConfigArgsDict

AKS_SPOT_TAINT = Taint(key=azure.SCALESET_PRIORITY_LABEL, value="spot", effect="NoSchedule")
AZURE_TYPE = "azure-native:containerservice:AgentPool"
#: AKS agent pool names: lowercase letters and digits, starting with a letter, at most 12 for Linux pools
#: (https://learn.microsoft.com/azure/aks/create-node-pools#limitations).
AGENT_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")


class AksCluster(StrictModel):
    """`cloud.aks`: the AKS cluster the pools join. Credentials come from the environment (az login, ARM_*)."""

    subscription_id: str = Field(description="Azure subscription of the cluster.")
    resource_group: RefConfig = Field(description="Resource group, or {stack, output} from the cluster stack.")
    cluster: RefConfig = Field(description="Managed cluster name, or {stack: org/project/stack, output: clusterName}.")


class AksPool(StrictModel):
    vm_size: Annotated[str, AfterValidator(lambda name: known_machine("aks", name))] = Field(
        description="Azure VM size, e.g. Standard_ND96isr_H100_v5 (machine_types/aks.yaml)."
    )
    availability_zones: list[str] = Field(default_factory=list, description='Zones, e.g. ["1"]; none: regional.')
    gpu_driver: Literal["Install", "None"] = Field(
        default="Install", description="AKS installs the NVIDIA driver; None when the GPU Operator does."
    )
    capacity_reservation_group_id: RefConfig | None = Field(
        default=None, description="On-demand capacity reservation group (required with capacityType: reserved)."
    )


class AksAgentPoolArgs(TypedDict, total=False):
    """The keyword arguments of `pulumi_azure_native.containerservice.AgentPool` this backend sets."""

    resource_group_name: Input[str]
    resource_name_: Input[str]
    agent_pool_name: str
    vm_size: str
    mode: str
    os_type: str
    max_pods: int
    node_labels: dict[str, str]
    node_taints: list[str]
    count: int
    enable_auto_scaling: bool
    min_count: int
    max_count: int
    availability_zones: list[str]
    scale_set_priority: str
    scale_set_eviction_policy: str
    spot_max_price: float
    capacity_reservation_group_id: Input[str]
    gpu_profile: GPUProfileArgsDict
    kubelet_config: KubeletConfigArgsDict
    os_disk_size_gb: int
    kubelet_disk_type: str


if TYPE_CHECKING:

    def _sdk_accepts(args: AksAgentPoolArgs) -> SdkAgentPool:
        """Never called: mypy checks every argument against the SDK's own signature."""
        return SdkAgentPool("", **args)


def _machine(settings: Any) -> Machine | None:
    return machine_table("aks").get(settings.vm_size) if isinstance(settings, AksPool) else None


def agent_pool_args(pool: ResolvedPool, cluster: AksCluster) -> AksAgentPoolArgs:
    settings: AksPool = pool.settings
    machine = _machine(settings)
    assert machine is not None  # checked
    args: AksAgentPoolArgs = {
        "resource_group_name": sdk_value(ref(cluster.resource_group)),
        "resource_name_": sdk_value(ref(cluster.cluster)),
        "agent_pool_name": pool.name,
        "vm_size": settings.vm_size,
        "mode": "User",
        "os_type": "Linux",
        "max_pods": machine.facts.max_pods,
        "node_labels": dict(pool.node_labels),
        "node_taints": [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in pool.taints],
        "gpu_profile": {"driver": settings.gpu_driver},
        # AKS custom node configuration: kubeletConfig.podMaxPids (pulumi_azure_native 3.29.0
        # containerservice.KubeletConfigArgsDict.pod_max_pids, "The maximum number of processes per pod")
        "kubelet_config": {"pod_max_pids": pool.config.pod_pids_limit},
    }
    if pool.disk is not None:
        # kubeletDiskType OS: "emptyDir volumes, container runtime data root, and Kubelet ephemeral storage" live on
        # the OS disk (pulumi_azure_native 3 containerservice.KubeletDiskType), the disk sized here
        args.update({"os_disk_size_gb": pool.disk.size_gib, "kubelet_disk_type": "OS"})
    if pool.autoscaling is not None:
        low, high = pool.autoscaling
        args.update({"enable_auto_scaling": True, "min_count": low, "max_count": high, "count": low})
    else:
        args["count"] = pool.node_count
    if settings.availability_zones:
        args["availability_zones"] = list(settings.availability_zones)
    if pool.config.capacity_type == "spot":
        # Delete: an evicted node goes away instead of holding its GPUs' quota; -1: pay up to the on-demand price
        args.update({"scale_set_priority": "Spot", "scale_set_eviction_policy": "Delete", "spot_max_price": -1.0})
    if settings.capacity_reservation_group_id is not None:
        args["capacity_reservation_group_id"] = sdk_value(ref(settings.capacity_reservation_group_id))
    return args


class AksBackend(CloudNodeGroup):
    """AKS agent pools from a VM size; fixed `size.count` or autoscaling `size.min`..`size.max`."""

    name = "aks"
    settings_model = AksPool
    settings_hint = "aks: {vmSize: Standard_ND96isr_H100_v5}"
    cluster_model = AksCluster

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        return (HOSTNAME,)

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        return frozenset({ZONE, HOSTNAME})

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        return "aks"

    def shape(self, pool: NodePool, settings: Any) -> NodeShape | None:
        machine = _machine(settings)
        return machine.shape if machine is not None else None

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        settings: AksPool = pool.settings
        at, capacity = f"{pool.at}.aks", pool.config.capacity_type
        issues: list[ConfigIssue] = []
        if not AGENT_POOL_NAME.match(pool.name):
            issues.append(
                ConfigIssue(
                    f"{pool.at}.name",
                    "AKS names Linux agent pools with 1-12 lowercase letters and digits",
                    pool.name,
                    "rename the pool, e.g. h100",
                )
            )
        issues += size_issues(pool)
        if capacity == "spot" and settings.capacity_reservation_group_id is not None:
            issues.append(
                ConfigIssue(
                    f"{at}.capacityReservationGroupId",
                    "Spot VMs never consume a capacity reservation",
                    "spot",
                    "capacityType: reserved, or drop the reservation group",
                )
            )
        if capacity == "reserved" and settings.capacity_reservation_group_id is None:
            issues.append(ConfigIssue(f"{at}.capacityReservationGroupId", "required with capacityType: reserved"))
        if capacity == "spot" and AKS_SPOT_TAINT not in pool.taints:
            spot = f"{AKS_SPOT_TAINT.key}={AKS_SPOT_TAINT.value}:{AKS_SPOT_TAINT.effect}"
            issues.append(
                ConfigIssue(
                    f"{pool.at}.taints",
                    f"AKS taints every Spot node {spot}",
                    None,
                    f"declare it in taints (with the GPU taint): [{spot}, {nvidia.GPU}=present:NoSchedule]",
                )
            )
        return issues

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return []  # the agent pool is a cloud resource

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        c: AksCluster = cluster
        return [
            CloudResource(
                provider=provider(AZURE, self.name, {"subscription_id": c.subscription_id}),
                module="containerservice",
                resource="AgentPool",
                type_token=AZURE_TYPE,
                name=f"aks-{pool.name}",
                args=dict(agent_pool_args(pool, c)),
                # the autoscaler owns the node count of an autoscaling pool: `up` must not put it back
                options=CloudOptions(ignore_changes=("count",) if pool.autoscaling else ()),
            )
        ]


BACKEND = AksBackend()
