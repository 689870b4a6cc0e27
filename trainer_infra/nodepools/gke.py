"""gke backend: one GKE node pool (`gcp.container.NodePool`) per pool, in the cluster named by `cloud.gke`.

Owns: the node pool (machine type, GPUs with driver installation, labels, taints, size or autoscaling limits, spot,
reservation affinity, compact placement, queued provisioning, the kubelet's per-pod PID limit). Never touches: the
cluster, its VPC, its service accounts and IAM (the cluster stack's), other node pools. The node shape comes from the
machine table (machine_types/gke.yaml); the topology levels are the labels GKE itself puts on nodes whose physical
topology Compute Engine reports (A3 High 8-GPU, A3 Mega, or a compact placement policy):
`cloud.google.com/gce-topology-block`, `-subblock`, `-host`, then `kubernetes.io/hostname`
(https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas,
https://cloud.google.com/compute/docs/instances/view-instance-topology). Other pools: zone and hostname.

Replacement: the node pool is protected (unless allowDataLoss) and no property is marked replace-on-change; what
the GKE API updates in place (node count, autoscaling limits, labels, taints) stays an update
(the in-place tests check it). `node_count` is left to the autoscaler on autoscaling pools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from pydantic import AfterValidator, Field

from trainer_infra.core.cloud import GCP, CloudOptions, CloudResource, sdk_value
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import gke
from trainer_infra.nodepools.cloud import CloudNodeGroup, RefConfig, provider, ref, size_issues
from trainer_infra.nodepools.disk import DiskRule
from trainer_infra.nodepools.labels import HOSTNAME, ZONE
from trainer_infra.nodepools.machines import Machine, known_machine, machine_table
from trainer_infra.nodepools.model import NodePool, NodeShape, ProvisioningRequest, ResolvedPool

if TYPE_CHECKING:
    from pulumi import Input
    from pulumi_gcp.container import (
        NodePool as SdkNodePool,
    )
    from pulumi_gcp.container import (
        NodePoolAutoscalingArgsDict,
        NodePoolManagementArgsDict,
        NodePoolNodeConfigArgsDict,
        NodePoolNodeConfigGuestAcceleratorArgsDict,
        NodePoolNodeConfigReservationAffinityArgsDict,
        NodePoolNodeConfigTaintArgsDict,
        NodePoolPlacementPolicyArgsDict,
        NodePoolQueuedProvisioningArgsDict,
    )

GKE_TOPOLOGY_BLOCK = gke.TOPOLOGY_BLOCK_LABEL
GKE_TOPOLOGY_SUBBLOCK = gke.TOPOLOGY_SUBBLOCK_LABEL
GKE_TOPOLOGY_HOST = gke.TOPOLOGY_HOST_LABEL
GKE_TOPOLOGY = (GKE_TOPOLOGY_BLOCK, GKE_TOPOLOGY_SUBBLOCK, GKE_TOPOLOGY_HOST, HOSTNAME)
QUEUED_PROVISIONING_CLASS = gke.QUEUED_PROVISIONING_CLASS
#: The key a SPECIFIC_RESERVATION affinity names its reservation by (GKE node pool reservationAffinity).
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
GCP_TYPE = "gcp:container/nodePool:NodePool"


class GkeCluster(StrictModel):
    """`cloud.gke`: the GKE cluster the pools join. Credentials come from the environment (gcloud ADC)."""

    project: str = Field(description="Google Cloud project of the cluster.")
    location: str = Field(description="The cluster's region or zone, e.g. us-central1.")
    cluster: RefConfig = Field(
        description="Cluster name, or {stack: org/project/stack, output: clusterName} from the cluster stack."
    )


class GkeReservation(StrictModel):
    name: str = Field(description="A specific Compute Engine reservation (SPECIFIC_RESERVATION).")
    project: str | None = Field(default=None, description="Its project when shared from another one.")


class GkePool(StrictModel):
    machine_type: Annotated[str, AfterValidator(lambda name: known_machine("gke", name))] = Field(
        description="Compute Engine machine type, e.g. a3-megagpu-8g (machine_types/gke.yaml)."
    )
    node_locations: list[str] = Field(min_length=1, description="Zones of the pool's nodes, e.g. [us-central1-a].")
    gpu_driver_version: Literal["DEFAULT", "LATEST", "INSTALLATION_DISABLED"] = Field(
        default="LATEST", description="GKE-managed NVIDIA driver installation (INSTALLATION_DISABLED: bring your own)."
    )
    reservation: GkeReservation | None = Field(default=None, description="Required with capacityType: reserved.")
    compact_placement: bool = Field(default=False, description="COMPACT placement policy (one zone).")
    queued_provisioning: bool = Field(
        default=False,
        description="DWS flex-start queued provisioning: nodes exist only once Kueue's ProvisioningRequest is granted.",
    )
    service_account: RefConfig | None = Field(default=None, description="Node service account email.")
    disk_size_gb: int | None = Field(default=None, description="Replaced by nodePools[].disk (refused, with the hint).")


class GkeNodePoolArgs(TypedDict, total=False):
    """The keyword arguments of `pulumi_gcp.container.NodePool` this backend sets (mypy checks them below)."""

    cluster: Input[str]
    location: str
    project: str
    name: str
    node_locations: list[str]
    node_count: int
    autoscaling: NodePoolAutoscalingArgsDict
    management: NodePoolManagementArgsDict
    node_config: NodePoolNodeConfigArgsDict
    placement_policy: NodePoolPlacementPolicyArgsDict
    queued_provisioning: NodePoolQueuedProvisioningArgsDict


if TYPE_CHECKING:

    def _sdk_accepts(args: GkeNodePoolArgs) -> SdkNodePool:
        """Never called: mypy checks every argument against the SDK's own signature."""
        return SdkNodePool("", **args)


def _machine(pool: NodePool, settings: GkePool) -> Machine | None:
    return machine_table("gke").get(settings.machine_type)


def _topology_capable(machine: Machine | None, settings: GkePool) -> bool:
    return settings.compact_placement or (machine is not None and machine.facts.topology)


def node_config(pool: ResolvedPool, settings: GkePool, machine: Machine) -> NodePoolNodeConfigArgsDict:
    config: NodePoolNodeConfigArgsDict = {
        "machine_type": settings.machine_type,
        "labels": dict(pool.node_labels),
        "taints": [_taint(t.key, t.value, t.effect) for t in pool.taints],
        # GKE node system configuration: kubeletConfig.podPidsLimit (pulumi_gcp 10.2.0
        # NodePoolNodeConfigKubeletConfigArgsDict.pod_pids_limit; GKE takes 1024 to 4194303)
        "kubelet_config": {"pod_pids_limit": pool.config.pod_pids_limit},
    }
    gpu = machine.facts.gpu
    if gpu is not None and gpu.type is not None:
        accelerator: NodePoolNodeConfigGuestAcceleratorArgsDict = {
            "type": gpu.type,
            "count": gpu.count,
            "gpu_driver_installation_config": {"gpu_driver_version": settings.gpu_driver_version},
        }
        config["guest_accelerators"] = [accelerator]
    if pool.config.capacity_type == "spot":
        config["spot"] = True
    affinity = _reservation_affinity(settings)
    if affinity is not None:
        config["reservation_affinity"] = affinity
    if settings.service_account is not None:
        config["service_account"] = sdk_value(ref(settings.service_account))
    if pool.disk is not None:
        # the boot disk holds pods' ephemeral storage and the images (no local SSD ephemeral storage configured);
        # boot_disk rather than disk_size_gb, which pulumi_gcp 10 says is "being migrated to boot_disk.size_gb"
        config["boot_disk"] = {"size_gb": pool.disk.size_gib}
    return config


def _taint(key: str, value: str, effect: str) -> NodePoolNodeConfigTaintArgsDict:
    """GKE spells effects in its API's enum: NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE."""
    gke_effect = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
    return {"key": key, "value": value, "effect": gke_effect[effect]}


def _reservation_affinity(settings: GkePool) -> NodePoolNodeConfigReservationAffinityArgsDict | None:
    if settings.queued_provisioning:  # queued provisioning never consumes reservations (GKE refuses it)
        return {"consume_reservation_type": "NO_RESERVATION"}
    res = settings.reservation
    if res is None:
        return None
    name = f"projects/{res.project}/reservations/{res.name}" if res.project else res.name
    return {"consume_reservation_type": "SPECIFIC_RESERVATION", "key": RESERVATION_KEY, "values": [name]}


def node_pool_args(pool: ResolvedPool, cluster: GkeCluster) -> GkeNodePoolArgs:
    settings: GkePool = pool.settings
    machine = _machine(pool.config, settings)
    assert machine is not None  # checked
    args: GkeNodePoolArgs = {
        "cluster": sdk_value(ref(cluster.cluster)),
        "location": cluster.location,
        "project": cluster.project,
        "name": pool.name,
        "node_locations": list(settings.node_locations),
        "node_config": node_config(pool, settings, machine),
        # auto-upgrade moves GPU nodes under running jobs; repair too, and queued provisioning refuses it
        "management": {"auto_repair": not settings.queued_provisioning, "auto_upgrade": True},
    }
    if pool.autoscaling is not None:
        low, high = pool.autoscaling
        # total_* count nodes across all zones (min/max_node_count would be per zone); ANY lets GKE pick the zone
        args["autoscaling"] = {"total_min_node_count": low, "total_max_node_count": high, "location_policy": "ANY"}
        if not settings.queued_provisioning:
            args["node_count"] = low
    else:
        args["node_count"] = pool.node_count // len(settings.node_locations)  # per zone; divisibility is checked
    if settings.compact_placement:
        args["placement_policy"] = {"type": "COMPACT"}
    if settings.queued_provisioning:
        args["queued_provisioning"] = {"enabled": True}
    return args


class GkeBackend(CloudNodeGroup):
    """GKE node pools from a machine type; fixed `size.count` or autoscaling `size.min`..`size.max`."""

    name = "gke"
    settings_model = GkePool
    settings_hint = "gke: {machineType: a3-megagpu-8g, nodeLocations: [us-central1-a]}"
    scaling_hint = "use a fixed size.count, gke.queuedProvisioning: true, or components.kueue.tas.enabled: false"
    cluster_model = GkeCluster

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        if isinstance(settings, GkePool) and _topology_capable(_machine(pool, settings), settings):
            return GKE_TOPOLOGY
        return (HOSTNAME,)

    def provided_levels(self, pool: NodePool, settings: Any) -> frozenset[str] | None:
        if isinstance(settings, GkePool) and _topology_capable(_machine(pool, settings), settings):
            return frozenset({*GKE_TOPOLOGY, ZONE})
        return frozenset({ZONE, HOSTNAME})

    def disk_rule(self, pool: NodePool, settings: Any) -> DiskRule | None:
        return "gke"

    def shape(self, pool: NodePool, settings: Any) -> NodeShape | None:
        machine = _machine(pool, settings) if isinstance(settings, GkePool) else None
        return machine.shape if machine is not None else None

    def provisioning(self, pool: NodePool, settings: Any) -> ProvisioningRequest | None:
        if not (isinstance(settings, GkePool) and settings.queued_provisioning):
            return None
        machine = _machine(pool, settings)
        gpu = machine.facts.gpu if machine else None
        return ProvisioningRequest(QUEUED_PROVISIONING_CLASS, (gpu.resource,) if gpu else ())

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        settings: GkePool = pool.settings
        at, size, capacity = f"{pool.at}.gke", pool.config.size, pool.config.capacity_type
        issues = size_issues(pool)
        if settings.disk_size_gb is not None:
            issues.append(
                ConfigIssue(
                    f"{at}.diskSizeGb",
                    "moved to the pool's disk, which every backend that renders a node's disk reads",
                    str(settings.disk_size_gb),
                    f"disk: {settings.disk_size_gb}Gi (or drop it: the default fits tenancy.ephemeralStorage.max)",
                )
            )
        zones = len(settings.node_locations)
        if size.count is not None and size.count % zones:
            issues.append(
                ConfigIssue(
                    f"{pool.at}.size.count",
                    f"GKE gives every zone the same node count: a multiple of {zones}",
                    str(size.count),
                    "or use one zone in nodeLocations",
                )
            )
        if capacity == "spot" and settings.reservation is not None:
            issues.append(
                ConfigIssue(
                    f"{at}.reservation",
                    "Spot VMs never consume a reservation",
                    settings.reservation.name,
                    "capacityType: reserved, or drop the reservation",
                )
            )
        if capacity == "reserved" and settings.reservation is None and not settings.queued_provisioning:
            issues.append(
                ConfigIssue(
                    f"{at}.reservation",
                    "required with capacityType: reserved",
                    None,
                    "reservation: {name: <reservation>}",
                )
            )
        if settings.compact_placement and zones > 1:
            issues.append(
                ConfigIssue(
                    f"{at}.nodeLocations",
                    "compact placement keeps a pool in one zone",
                    ", ".join(settings.node_locations),
                )
            )
        if settings.queued_provisioning:
            issues += _queued_checks(pool, settings)
        return issues

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return []  # the node pool is a cloud resource; Kueue's ProvisioningRequest check is the queues area's

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        return gke_resources(pool, cluster)


def _queued_checks(pool: ResolvedPool, settings: GkePool) -> list[ConfigIssue]:
    """GKE's rules for queued provisioning node pools (autoscaling from zero, no reservation, no Spot)."""
    at, size = f"{pool.at}.gke.queuedProvisioning", pool.config.size
    issues = []
    if size.max is None or size.count is not None or size.min:
        issues.append(
            ConfigIssue(
                at,
                "queued provisioning pools autoscale from zero: set only size.max",
                f"size {size.model_dump(exclude_none=True)}",
            )
        )
    if pool.config.capacity_type != "on-demand" or settings.reservation is not None:
        issues.append(
            ConfigIssue(
                at, "queued provisioning takes on-demand capacity: no Spot, no reservation", pool.config.capacity_type
            )
        )
    if settings.compact_placement:
        issues.append(ConfigIssue(at, "GKE refuses compact placement with queued provisioning", "compactPlacement"))
    return issues


def gke_resources(pool: ResolvedPool, cluster: GkeCluster) -> list[CloudResource]:
    autoscaled = pool.autoscaling is not None
    return [
        CloudResource(
            provider=provider(GCP, "gke", {"project": cluster.project, "region": _region(cluster.location)}),
            module="container",
            resource="NodePool",
            type_token=GCP_TYPE,
            name=f"gke-{pool.name}",
            args=dict(node_pool_args(pool, cluster)),
            # the autoscaler owns the node count of an autoscaling pool: `up` must not put it back
            options=CloudOptions(ignore_changes=("nodeCount",) if autoscaled else ()),
        )
    ]


def _region(location: str) -> str:
    """us-central1-a → us-central1 (a zonal cluster's region); a region stays itself."""
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) > 2 else location


BACKEND = GkeBackend()
