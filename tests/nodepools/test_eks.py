"""The eks backend: managed node groups with the launch template and placement group EFA, Capacity Blocks and
reservations need; what it refuses; and that scaling, label and taint changes stay in-place updates."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.pools_helpers import issues, stack
from trainer_infra.core.cloud import CloudResource, ResourceOutput, StackOutput
from trainer_infra.nodepools.eks import REPLACED_ON
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

STACKS = Path(__file__).resolve().parents[2] / "stacks"
CLUSTER_STACK = "acme/eks-cluster/prod"


def eks_stack() -> dict[str, Any]:
    doc = yaml.safe_load((STACKS / "Pulumi.eks.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in doc.items()}


def resources(raw: dict[str, Any]) -> dict[str, CloudResource]:
    return {r.name: r for r in build_plan(validate(raw)).resources}


def eks_pool(**eks: Any) -> dict[str, Any]:
    # fixed: an autoscaling pool under TAS (on in these stacks) is refused without a ProvisioningRequest class
    pool: dict[str, Any] = {"name": "g6", "backend": "eks", "size": {"count": 2}}
    pool["eks"] = {"instanceType": "g6.12xlarge", **eks}
    return pool


def with_cluster(pools: list[dict[str, Any]]) -> dict[str, Any]:
    return stack(pools, cloud=eks_stack()["cloud"])


def test_the_example_stack_renders_node_groups_a_launch_template_and_a_placement_group() -> None:
    found = resources(eks_stack())
    group = found["h100"]
    assert (group.type_token, group.provider.args) == ("aws:eks/nodeGroup:NodeGroup", {"region": "us-east-1"})
    args = group.args
    assert args["cluster_name"] == StackOutput(CLUSTER_STACK, "clusterName")
    assert args["capacity_type"] == "CAPACITY_BLOCK" and "instance_types" not in args
    assert args["scaling_config"] == {"min_size": 4, "max_size": 4, "desired_size": 4}
    assert args["ami_type"] == "AL2023_x86_64_NVIDIA"
    assert args["labels"]["trainer-platform.io/node-pool"] == "h100"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"} in args["taints"]
    assert args["launch_template"] == {
        "id": ResourceOutput("h100-launch-template", "id"),
        "version": ResourceOutput("h100-launch-template", "latest_version", as_string=True),
    }
    template = found["h100-launch-template"].args
    assert template["instance_market_options"] == {"market_type": "capacity-block"}
    assert template["instance_type"] == "p5.48xlarge"
    target = template["capacity_reservation_specification"]["capacity_reservation_target"]
    assert target == {"capacity_reservation_id": "cr-0a1b2c3d4e5f60718"}
    assert template["placement"] == {"group_name": ResourceOutput("h100-placement", "name")}
    interfaces = template["network_interfaces"]
    assert len(interfaces) == 32 and all(i["interface_type"] == "efa" for i in interfaces)
    assert [(i["network_card_index"], i["device_index"]) for i in interfaces[:2]] == [(0, 0), (1, 1)]
    assert found["h100-placement"].args == {"strategy": "cluster"}
    spot = found["l4"].args
    assert spot["capacity_type"] == "SPOT" and spot["instance_types"] == ["g6.12xlarge"]
    assert spot["scaling_config"] == {"min_size": 4, "max_size": 4, "desired_size": 4}  # fixed: TAS is on
    assert spot["launch_template"]["id"] == ResourceOutput("l4-launch-template", "id")  # its user data: the PID limit
    assert set(found["l4-launch-template"].args) == {"update_default_version", "user_data", "block_device_mappings"}
    assert found["l4"].options.ignore_changes == ("scalingConfig.desiredSize",)
    assert all(r.options.protect and not r.options.replace_on_changes for r in found.values())


def test_topology_is_what_the_cloud_controller_manager_labels() -> None:
    plan = build_plan(validate(eks_stack()))
    levels = {
        tuple(lv["nodeLabel"] for lv in o.manifest["spec"]["levels"])
        for o in plan.objects
        if o.manifest["kind"] == "Topology"
    }
    p5 = ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2")
    assert (*p5, "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname") in levels
    assert ("topology.kubernetes.io/zone", "kubernetes.io/hostname") in levels  # g6 has no EC2 topology


@pytest.mark.parametrize(
    ("change", "args_changed"),
    [
        (lambda p: p["size"].update(count=8), {"scaling_config"}),
        (lambda p: p.update(labels={"example.com/tier": "gold"}), {"labels"}),
        (lambda p: p.update(taints=[{"key": "gpu", "value": "l4"}]), {"taints"}),
    ],
    ids=["scaling", "labels", "taints"],
)
def test_an_in_place_change_of_a_node_group_stays_in_place(change: Any, args_changed: set[str]) -> None:
    """Only arguments the provider updates in place change (terraform-provider-aws node_group.go marks the others
    ForceNew), and no replace-on-change option turns the update into a replace."""
    before = eks_pool()
    after = copy.deepcopy(before)
    change(after)
    old = resources(with_cluster([before]))["g6"]
    new = resources(with_cluster([after]))["g6"]
    differing = {k for k in old.args.keys() | new.args.keys() if old.args.get(k) != new.args.get(k)}
    assert differing == args_changed
    assert not differing & REPLACED_ON and not new.options.replace_on_changes and new.options.protect


def test_a_new_instance_type_is_a_replace_the_preview_shows() -> None:
    old = resources(with_cluster([eks_pool()]))["g6"]
    new = resources(with_cluster([eks_pool(instanceType="g6.48xlarge")]))["g6"]
    assert {k for k in old.args if old.args[k] != new.args.get(k)} & REPLACED_ON == {"instance_types"}


BAD: list[tuple[str, dict[str, Any], str, str, str]] = [
    ("efa without it", eks_pool(instanceType="g6.4xlarge", efa=True), "efa", "no EFA interfaces", "g6.4xlarge"),
    (
        "a reservation on spot",
        {**eks_pool(capacityReservation="cr-0123456789abcdef0"), "capacityType": "spot"},
        "capacityReservation",
        "not spot",
        "capacityType: spot, capacityReservation: cr-0123456789abcdef0",
    ),
    (
        "reserved without a reservation",
        {**eks_pool(), "capacityType": "reserved"},
        "capacityReservation",
        "needs the reservation",
        "capacityReservation: null",
    ),
    (
        "efa across zones",
        eks_pool(instanceType="g6.48xlarge", efa=True, securityGroups=["sg-1"], subnets=["subnet-a", "subnet-b"]),
        "subnets",
        "one Availability Zone",
        "2 subnets",
    ),
    (
        "efa without security groups",
        eks_pool(instanceType="g6.48xlarge", efa=True, subnets=["subnet-a"]),
        "securityGroups",
        "carry their own security groups",
        "securityGroups: null",
    ),
    (
        "a Neuron AMI on NVIDIA GPUs",
        eks_pool(amiType="AL2023_x86_64_NEURON"),
        "amiType",
        "this AMI serves aws.amazon.com/neuron",
        "instanceType: g6.12xlarge",
    ),
]


@pytest.mark.parametrize(("pool", "key", "message", "found"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refused_with_path_both_values_and_a_hint(pool: dict[str, Any], key: str, message: str, found: str) -> None:
    every = issues(with_cluster([pool]))
    matching = [i for i in every if i.path == f"nodePools[0].eks.{key}" and message in i.message]
    assert matching, [i.render() for i in every]
    assert found in (matching[0].found or "") and matching[0].hint, matching[0].render()


def test_a_network_layer_on_a_type_without_ec2_topology_is_refused() -> None:
    every = issues(
        with_cluster([{**eks_pool(), "topology": ["topology.k8s.aws/network-node-layer-1", "kubernetes.io/hostname"]}])
    )
    assert any(
        i.path == "nodePools[0].topology" and "topology.k8s.aws/network-node-layer-1" in (i.found or "") for i in every
    ), [i.render() for i in every]


def test_an_unknown_instance_type_names_the_closest_row() -> None:
    (issue,) = issues(with_cluster([eks_pool(instanceType="p5.48xlarg")]))
    assert issue.path == "nodePools[0].eks.instanceType" and issue.found == '"p5.48xlarg"'
    assert "not in the EKS machine table" in issue.message and "did you mean 'p5.48xlarge'?" in issue.message


def test_the_example_stack_installs_the_device_plugins_its_amis_lack() -> None:
    """AL2023 NVIDIA nodes (both node groups) get NVIDIA's plugin, the EFA node group the EFA
    plugin: each DaemonSet only where it is needed."""
    from tests.helpers import render

    found = {r["name"]: r for r in render(eks_stack()).releases}
    nvidia = found["nvidia-device-plugin"]["values"]["affinity"]["nodeAffinity"]
    terms = nvidia["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["h100", "l4"]
    assert found["aws-efa-k8s-device-plugin"]["values"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists"}
    ]


def test_efa_interfaces_are_a_covered_resource_shared_like_the_gpus() -> None:
    """Pods of an EFA pool request vpc.amazonaws.com/efa; Kueue admits no pod asking for a resource its ClusterQueue
    does not cover. Each team gets the interfaces of the GPUs it holds (p5.48xlarge: 32 per 8 GPUs), 0 elsewhere."""
    plan = build_plan(validate(eks_stack()))
    queues = {o.manifest["metadata"]["name"]: o.manifest for o in plan.objects if o.manifest["kind"] == "ClusterQueue"}
    for name, gpus_on_h100 in (("nlp", 24), ("vision", 8)):
        [group] = queues[name]["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa"]
        quota = {
            f["name"].split("-")[0]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]
        }
        assert quota["h100"]["vpc.amazonaws.com/efa"] == str(gpus_on_h100 * 32 // 8)
        assert quota["l4"]["vpc.amazonaws.com/efa"] == "0"  # g6 nodes have no EFA


def test_a_gpu_limit_limits_the_interfaces_that_go_with_it() -> None:
    efa = eks_pool(instanceType="p5.48xlarge", efa=True, securityGroups=["sg-1"], subnets=["subnet-a"])
    team = {"name": "t", "quota": {"g6": {"gpus": 16, "borrowingLimit": {"gpus": 8}, "lendingLimit": {"gpus": 0}}}}
    raw = with_cluster([{**efa, "size": {"count": 4}}])
    raw["teams"] = [team]
    [limits] = validate(raw).queues.teams["t"].values()
    assert limits.nominal["vpc.amazonaws.com/efa"] == 64
    assert limits.borrowing["vpc.amazonaws.com/efa"] == 32 and limits.lending["vpc.amazonaws.com/efa"] == 0
