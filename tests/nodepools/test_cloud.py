"""Cloud node pools (gke, aks): the machine tables, the typed SDK resources the example stacks render, and the
configs refused before anything reaches a cloud."""

from __future__ import annotations

import copy
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest

from tests.helpers import ROOT, render, stack_raw
from tests.pools_helpers import issues, stack
from trainer_infra.core.quantity import quantity
from trainer_infra.nodepools.allocatable import GI, MI, allocatable
from trainer_infra.nodepools.machines import machine_table

GKE_CLUSTER = {"gke": {"project": "p", "location": "us-central1", "cluster": "train"}}
AKS_CLUSTER = {"aks": {"subscriptionId": "s", "resourceGroup": "rg", "cluster": "train"}}


def gke_pool(name: str = "h100", machine: str = "a3-megagpu-8g", **extra: Any) -> dict[str, Any]:
    gke = {"machineType": machine, "nodeLocations": ["us-central1-a"], **extra.pop("gke", {})}
    return {"name": name, "backend": "gke", "size": {"count": 2}, "gke": gke, **extra}


def gke_stack(*pools: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return stack(list(pools), cloud=GKE_CLUSTER, **extra)


def _messages(raw: dict[str, Any]) -> dict[str, str]:
    return {i.path: f"{i.message} | found {i.found} | hint {i.hint}" for i in issues(raw)}


def _resources(raw: dict[str, Any], type_prefix: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in render(raw).resources if r["type"].startswith(type_prefix)}


@pytest.mark.parametrize("cloud", ["gke", "eks", "aks"])
def test_every_machine_row_has_a_source_and_offers_less_than_it_has(cloud: str) -> None:
    table = machine_table(cloud)
    for name in table.names():
        machine = table.get(name)
        assert machine is not None and machine.facts.source.startswith("https://"), name
        shape = machine.shape
        assert Decimal(0) < quantity(shape.cpu) < machine.facts.vcpu, name
        assert Decimal(0) < quantity(shape.memory) < machine.facts.memory_gib * GI, name


def test_allocatable_follows_each_clouds_published_rule() -> None:
    # GKE: 16 GiB → 25% of 4 + 20% of 4 + 10% of 8 = 2.6 GiB reserved, + 100 MiB eviction; 4 cores → 6+1+0.5+0.5 %
    cpu, memory = allocatable("gke", 4, 16 * GI, 110)
    assert cpu == Decimal("3.92") and memory == 13621 * MI  # 16384 - 2662.4 - 100 MiB, rounded down
    # EKS AMI: 11 MiB × max pods + 255 MiB, + 100 MiB eviction (p5.48xlarge: 100 pods)
    cpu, memory = allocatable("eks", 192, 2048 * GI, 100)
    assert memory == 2048 * GI - (11 * 100 + 255) * MI - 100 * MI
    assert cpu == Decimal(192) - Decimal("0.06") - Decimal("0.01") - Decimal("0.01") - Decimal("0.0025") * 188
    # AKS 1.29+: min(20 MB × max pods + 50 MB, 25%) + 100 Mi eviction; CPU 8 cores → 180m
    cpu, memory = allocatable("aks", 8, 32 * GI, 110)
    assert cpu == Decimal("7.82") and memory == 32 * GI - (20 * 110 + 50) * MI - 100 * MI


def test_gke_stack_renders_typed_node_pools_with_an_explicit_provider_and_the_cluster_stacks_outputs() -> None:
    rendered = render(stack_raw("gke"), "gke")
    pools = {r["name"]: r for r in rendered.resources if r["type"] == "gcp:container/nodePool:NodePool"}
    assert set(pools) == {"gke-h100", "gke-a100", "gke-l4"}
    (provider,) = [r for r in rendered.resources if r["type"] == "pulumi:providers:gcp"]
    assert provider["inputs"] == {"project": "ml-platform-prod", "region": "us-central1"}  # no credentials
    h100 = pools["gke-h100"]
    assert h100["provider"] == "gke-provider" and h100["protect"] and not h100["deleteBeforeReplace"]
    args = h100["inputs"]
    assert args["cluster"] == "<stack-output acme/gke-cluster/prod#clusterName>"
    config = args["nodeConfig"]
    a3 = machine_table("gke").get("a3-megagpu-8g")
    assert a3 is not None and a3.facts.gpu is not None
    assert config["machineType"] == "a3-megagpu-8g"
    assert config["guestAccelerators"] == [
        {"type": "nvidia-h100-mega-80gb", "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ]
    assert config["labels"]["trainer-platform.io/node-pool"] == "h100"
    assert config["labels"]["nvidia.com/gpu.product"] == a3.facts.gpu.product
    assert config["reservationAffinity"]["values"] == ["a3mega-reservation"]
    assert args["nodeCount"] == 4
    a100 = pools["gke-a100"]
    assert a100["inputs"]["queuedProvisioning"] == {"enabled": True}
    assert a100["inputs"]["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 8, "locationPolicy": "ANY"}
    assert a100["ignoreChanges"] == ["nodeCount"]  # the autoscaler's


def test_gke_flavors_topology_and_quotas_match_what_the_nodes_carry() -> None:
    rendered = render(stack_raw("gke"), "gke")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for m in rendered.manifests:
        by_kind.setdefault(m["kind"], []).append(m)
    levels = {t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]] for t in by_kind["Topology"]}
    assert [
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "kubernetes.io/hostname",
    ] in levels.values()
    assert ["kubernetes.io/hostname"] in levels.values()  # A2/G2 without compact placement report no topology
    (check,) = by_kind["AdmissionCheck"]
    (config,) = by_kind["ProvisioningRequestConfig"]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    assert config["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    a100_flavor = next(f["metadata"]["name"] for f in by_kind["ResourceFlavor"] if f["metadata"]["name"][:5] == "a100-")
    for queue in by_kind["ClusterQueue"]:
        rules = queue["spec"]["admissionChecksStrategy"]["admissionChecks"]
        assert rules == [{"name": check["metadata"]["name"], "onFlavors": [a100_flavor]}]
    # quotas are counted in allocatable figures: 4 × a3-megagpu-8g
    a3 = machine_table("gke").get("a3-megagpu-8g")
    assert a3 is not None
    nlp = next(q for q in by_kind["ClusterQueue"] if q["metadata"]["name"] == "nlp")
    h100 = next(f for f in nlp["spec"]["resourceGroups"][0]["flavors"] if f["name"].startswith("h100-"))
    cpu = next(r["nominalQuota"] for r in h100["resources"] if r["name"] == "cpu")
    assert quantity(cpu) == (quantity(a3.shape.cpu) * 4 * 24 / 32).quantize(Decimal("0.001"))


def test_aks_stack_renders_agent_pools() -> None:
    pools = _resources(stack_raw("aks"), "azure-native:containerservice:AgentPool")
    h100 = pools["aks-h100"]
    assert h100["protect"] and h100["provider"] == "aks-provider"
    args = h100["inputs"]
    assert args["vmSize"] == "Standard_ND96isr_H100_v5" and args["mode"] == "User" and args["maxPods"] == 110
    assert args["resourceName"] == "<stack-output acme/aks-cluster/prod#clusterName>"
    assert args["nodeTaints"] == ["nvidia.com/gpu=present:NoSchedule"]
    spot = pools["aks-a100spot"]["inputs"]
    assert spot["scaleSetPriority"] == "Spot" and spot["scaleSetEvictionPolicy"] == "Delete"


@pytest.mark.parametrize(
    ("stack_name", "type_token", "index", "change"),
    [
        ("gke", "gcp:container/nodePool:NodePool", 0, {"size": {"count": 6}, "labels": {"example.com/tier": "b"}}),
        ("gke", "gcp:container/nodePool:NodePool", 1, {"size": {"max": 12}}),
        ("aks", "azure-native:containerservice:AgentPool", 0, {"size": {"count": 3}, "labels": {"example.com/t": "b"}}),
    ],
)
def test_an_in_place_change_of_a_node_pool_never_asks_for_a_replace(
    stack_name: str, type_token: str, index: int, change: dict[str, Any]
) -> None:
    """What the program controls about replacement: no replace-on-change, no delete-first, protection, same name
    and provider. (Whether the provider itself updates a field in place is its diff, which needs the real
    provider: the opt-in E2E_CLOUD preview.)"""
    raw = stack_raw(stack_name)
    before = {r["name"]: r for r in render(raw).resources if r["type"] == type_token}
    changed = copy.deepcopy(raw)
    changed["nodePools"][index].update(change)
    after = {r["name"]: r for r in render(changed).resources if r["type"] == type_token}
    assert before.keys() == after.keys()
    for name, res in after.items():
        assert res["protect"] and not res["deleteBeforeReplace"] and "replaceOnChanges" not in res, name
        assert res["provider"] == before[name]["provider"]
    assert any(after[n]["inputs"] != before[n]["inputs"] for n in after)


def test_allow_data_loss_unprotects_the_node_pools() -> None:
    raw = stack_raw("gke")
    raw["allowDataLoss"] = True
    assert not any(r["protect"] for r in _resources(raw, "gcp:").values())


def test_a_shape_given_by_hand_may_only_be_smaller_than_the_machine() -> None:
    a3 = machine_table("gke").get("a3-megagpu-8g")
    assert a3 is not None
    bigger = gke_pool(node={"cpu": "208", "memory": "100Gi", "accelerator": {"count": 4}})
    msgs = _messages(gke_stack(bigger, teams=[]))
    assert f"more than a node of this machine type offers to pods ({a3.shape.cpu}" in msgs["nodePools[0].node.cpu"]
    assert "found 208" in msgs["nodePools[0].node.cpu"]
    assert "the machine type has 8 | found 4" in msgs["nodePools[0].node.accelerator.count"]
    smaller = gke_pool(node={"cpu": "150", "memory": "1000Gi", "accelerator": {"count": 8}})
    assert _messages(gke_stack(smaller)) == {}


@pytest.mark.parametrize(
    ("pool", "path", "words"),
    [
        (gke_pool(machine="a3-megagpu-9g"), "nodePools[0].gke.machineType", "did you mean 'a3-megagpu-8g'"),
        (
            gke_pool(capacityType="spot", gke={"reservation": {"name": "r"}}),
            "nodePools[0].gke.reservation",
            "Spot VMs never consume a reservation",
        ),
        (gke_pool(capacityType="reserved"), "nodePools[0].gke.reservation", "required with capacityType: reserved"),
        (
            gke_pool(size={"count": 2}, gke={"queuedProvisioning": True}),
            "nodePools[0].gke.queuedProvisioning",
            "autoscale from zero",
        ),
        (gke_pool(size={"count": 3}, gke={"nodeLocations": ["a", "b"]}), "nodePools[0].size.count", "multiple of 2"),
        (
            gke_pool(
                machine="g2-standard-8", topology=["cloud.google.com/gce-topology-host", "kubernetes.io/hostname"]
            ),
            "nodePools[0].topology",
            "nodes do not carry these labels",
        ),
        (gke_pool(size={"min": 0, "max": 4}), "nodePools[0].size", "admits only onto nodes that exist"),
    ],
)
def test_bad_cloud_pools_are_refused_with_the_path_and_a_hint(pool: dict[str, Any], path: str, words: str) -> None:
    raw = gke_stack(pool, components={"kueue": {"tas": {"enabled": True}}})
    msgs = _messages(raw)
    assert path in msgs and words in msgs[path], msgs


def test_autoscaling_quotas_count_the_max_and_say_so() -> None:
    pool = gke_pool(machine="g2-standard-8", size={"min": 0, "max": 3})
    no_tas = {"kueue": {"tas": {"enabled": False}}}
    raw = gke_stack(pool, teams=[{"name": "a", "quota": {"h100": {"gpus": 4}}}], components=no_tas)
    msgs = _messages(raw)
    assert (
        "(3 nodes: its autoscaling size.max)" in msgs["nodePools[0]"]
        and "grow the pool (size.max)" in msgs["nodePools[0]"]
    )


def test_a_cloud_pool_needs_its_cluster() -> None:
    raw = stack([gke_pool()])
    assert "required by nodePools[0] (backend gke)" in _messages(raw)["cloud.gke"]


def test_aks_spot_pools_declare_the_taint_aks_puts_on_them() -> None:
    pool = {"name": "spot", "backend": "aks", "capacityType": "spot", "size": {"count": 1}}
    pool["aks"] = {"vmSize": "Standard_NC24ads_A100_v4"}
    msgs = _messages(stack([pool], cloud=AKS_CLUSTER))
    assert "kubernetes.azure.com/scalesetpriority=spot:NoSchedule" in msgs["nodePools[0].taints"]


def test_a_missing_sdk_is_one_line_naming_the_pip_install() -> None:
    code = (
        "import sys; sys.modules['pulumi_gcp'] = None\n"
        "from trainer_infra.cli import main\n"
        "sys.exit(main(['render', '--stack', 'gke', '--out', sys.argv[1]]))"
    )
    done = subprocess.run([sys.executable, "-c", code, "/nonexistent/out"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == (
        "trainer-infra: this stack's gcp node pools need pulumi-gcp: pip install 'trainer-platform[gcp]'\n"
    )
