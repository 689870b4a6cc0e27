"""Node pools: what each backend creates, and the configs refused before anything is applied."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.helpers import render, stack_raw
from tests.pools_helpers import issues, karpenter_stack, kwok_pool, stack
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate


def _by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def test_local_stack_is_a_simulated_gpu_cluster_with_queues_for_two_teams() -> None:
    rendered = render(stack_raw("local"), "local")
    nodes = _by_kind(rendered.manifests, "Node")
    assert len(nodes) == 2 * 4 * 4
    labels = [n["metadata"]["labels"] for n in nodes]
    assert len({lb["trainer-platform.io/block"] for lb in labels}) == 2
    assert len({lb["trainer-platform.io/rack"] for lb in labels}) == 8
    assert Counter(lb["trainer-platform.io/rack"] for lb in labels).most_common(1)[0][1] == 4
    assert all(lb["kubernetes.io/hostname"] == n["metadata"]["name"] for lb, n in zip(labels, nodes, strict=True))
    for node in nodes:
        # kwok manages exactly the annotated nodes; its taint keeps real pods off them.
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        assert {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"  # quoted: the SDK misreads bare ints
    (deployment,) = [
        d for d in _by_kind(rendered.manifests, "Deployment") if d["metadata"]["namespace"] == "kwok-system"
    ]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.k8s.io/kwok/kwok:v0.8.0"
    assert len(_by_kind(rendered.manifests, "ClusterQueue")) == 2
    team_namespaces = {q["metadata"]["namespace"] for q in _by_kind(rendered.manifests, "LocalQueue")}
    assert team_namespaces == {"vision", "nlp"}
    # the tenancy area creates the team namespaces the queues live in
    assert team_namespaces <= {n["metadata"]["name"] for n in _by_kind(rendered.manifests, "Namespace")}


def test_kueue_objects_wait_for_kueue_and_immutable_changes_make_new_objects() -> None:
    rendered = render(stack_raw("local"), "local")
    [flavor] = [r for r in rendered.resources if r["type"] == "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"]
    assert "kueue-ready" in flavor["dependsOn"]
    assert flavor["deleteBeforeReplace"] is True
    plan = build_plan(validate(stack_raw("local")))
    by_kind = {o.manifest["kind"]: o for o in plan.objects}
    assert set(by_kind["ResourceFlavor"].replace_on_changes) == {
        "spec.topologyName",
        "spec.nodeLabels",
        "spec.tolerations",
    }
    assert by_kind["Topology"].replace_on_changes == ("spec.levels",)
    # Node status is only written on create: a new node shape must replace the fake nodes.
    assert by_kind["Node"].replace_on_changes == ("status",) and by_kind["Node"].delete_before_replace

    def names(raw: dict[str, Any]) -> dict[str, str]:
        objs = build_plan(validate(raw)).objects
        cq = next(o.manifest for o in objs if o.manifest["kind"] == "ClusterQueue")
        flavor = next(o.manifest for o in objs if o.manifest["kind"] == "ResourceFlavor")
        assert cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] == flavor["metadata"]["name"]
        topology = next(o.manifest for o in objs if o.manifest["kind"] == "Topology")
        return {"flavor": flavor["metadata"]["name"], "topology": topology["metadata"]["name"]}

    team = [{"name": "t", "quota": {"h100": {"gpus": 8}}}]
    base = names(stack([kwok_pool()], team))
    # Quotas are mutable: same flavor. Levels and tolerations are not: new Topology/flavor, queues follow.
    assert names(stack([kwok_pool()], [{"name": "t", "quota": {"h100": {"gpus": 16}}}])) == base
    relevelled = names(stack([kwok_pool(topology=["x.io/zone", "kubernetes.io/hostname"], layout=[2, 4])], team))
    assert relevelled["topology"] != base["topology"] and relevelled["flavor"] != base["flavor"]
    retainted = names(stack([kwok_pool(taints=[{"key": "gpu", "value": "h100"}])], team))
    assert retainted["flavor"] != base["flavor"] and retainted["topology"] == base["topology"]


def test_static_pool_patches_named_nodes_and_owns_nothing_else() -> None:
    pool = {
        "name": "onprem",
        "backend": "static",
        "node": {"cpu": "64", "memory": "512Gi", "accelerator": {"count": 4}},
        "labels": {"site": "dc1"},
        "static": {
            "nodes": [
                {"name": "gpu-01", "topology": {"trainer-platform.io/block": "b1", "trainer-platform.io/rack": "r1"}},
                {"name": "gpu-02", "topology": {"trainer-platform.io/block": "b1", "trainer-platform.io/rack": "r2"}},
            ]
        },
    }
    rendered = render(stack([pool], [{"name": "team-a", "quota": {"onprem": {"gpus": 8}}}]))
    patches = [r for r in rendered.resources if r["type"] == "kubernetes:core/v1:NodePatch"]
    assert sorted(r["name"] for r in patches) == ["nodepatch-gpu-01", "nodepatch-gpu-02"]
    assert not [r for r in rendered.resources if r["type"] == "kubernetes:core/v1:Node"]
    node = next(m for m in rendered.manifests if m["metadata"]["name"] == "gpu-02")
    assert "status" not in node and "annotations" not in node["metadata"]
    assert "app.kubernetes.io/managed-by" not in node["metadata"]["labels"]  # not our object
    assert node["metadata"]["labels"]["trainer-platform.io/rack"] == "r2"
    assert node["metadata"]["labels"]["site"] == "dc1"
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_karpenter_pool_limits_are_the_pool_maximum() -> None:
    pool = {
        "name": "p5",
        "backend": "karpenter",
        "node": {"cpu": "190", "memory": "2000Gi", "accelerator": {"count": 8}},
        "size": {"max": 4},
        "capacityType": "reserved",
        "karpenter": {
            "instanceTypes": ["p5.48xlarge"],
            "nodeClass": {
                "role": "KarpenterNodeRole",
                "subnetTags": {"k": "v"},
                "securityGroupTags": {"k": "v"},
                "capacityReservations": [{"id": "cr-0123456789abcdef0"}],
            },
        },
    }
    validated = validate(karpenter_stack([pool]))
    manifests = {o.manifest["kind"]: o.manifest for o in build_plan(validated).objects}
    spec = manifests["NodePool"]["spec"]
    # Karpenter weighs a launch by capacity (192 vCPU), not the pool's allocatable 190: a GPU pool is limited on
    # its GPUs, which both count alike (tests/e2e/test_karpenter_kwok.py: both nodes launch on Karpenter)
    assert spec["limits"] == {"nvidia.com/gpu": "32"}
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in spec["template"]["spec"][
        "requirements"
    ]
    assert spec["template"]["spec"]["nodeClassRef"]["name"] == manifests["EC2NodeClass"]["metadata"]["name"]
    levels = validated.pools[0].topology
    assert levels[0] == "topology.k8s.aws/network-node-layer-1" and levels[-1] == "kubernetes.io/hostname"


def karpenter_pool(**extra: Any) -> dict[str, Any]:
    return {
        "name": "p5",
        "backend": "karpenter",
        "node": {"cpu": "1", "memory": "1Gi", "accelerator": {"count": 8}},
        "size": {"max": 2},
        "karpenter": {"instanceTypes": ["p5.48xlarge"], "nodeClassName": "default"},
        **extra,
    }


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("duplicate pools", stack([kwok_pool("a"), kwok_pool("a")]), "nodePools[1].name", "duplicate pool name"),
    (
        "topology without hostname",
        stack([kwok_pool(topology=["x.io/block", "x.io/rack"], layout=[2, 2])]),
        "nodePools[0].topology",
        "must end with kubernetes.io/hostname",
    ),
    (
        "repeated level",
        stack([kwok_pool(topology=["x.io/rack", "x.io/rack", "kubernetes.io/hostname"])]),
        "nodePools[0].topology",
        "repeats a level",
    ),
    ("untainted gpu pool", stack([kwok_pool(taints=[])]), "nodePools[0].taints", "needs a taint"),
    ("layout length", stack([kwok_pool(layout=[2, 2])]), "nodePools[0].kwok.layout", "one count per topology level"),
    (
        "level karpenter lacks",
        stack([karpenter_pool(topology=["trainer-platform.io/rack", "kubernetes.io/hostname"])]),
        "nodePools[0].topology",
        "Karpenter nodes do not carry",
    ),
    (
        "label karpenter refuses",
        stack([karpenter_pool(labels={"kubernetes.io/role": "gpu"})]),
        "nodePools[0].labels.kubernetes.io/role",
        "Karpenter refuses",
    ),
    (
        "node in two static pools",
        stack(
            [
                {
                    "name": name,
                    "backend": "static",
                    "node": {"cpu": "1", "memory": "1Gi"},
                    "topology": ["kubernetes.io/hostname"],
                    "static": {"nodes": [{"name": "gpu-01"}]},
                }
                for name in ("a", "b")
            ]
        ),
        "nodePools[1].static.nodes[0]",
        "already in pool a",
    ),
    (
        "static node without its rack",
        stack(
            [
                {
                    "name": "onprem",
                    "backend": "static",
                    "node": {"cpu": "1", "memory": "1Gi", "accelerator": {"count": 8}},
                    "static": {"nodes": [{"name": "gpu-01", "topology": {"trainer-platform.io/block": "b1"}}]},
                }
            ]
        ),
        "nodePools[0].static.nodes[0].topology",
        "cannot provide these levels",
    ),
    (
        "indistinguishable selectors",
        stack(
            [
                {
                    "name": name,
                    "backend": "static",
                    "node": {"cpu": "1", "memory": "1Gi", "accelerator": {"count": 8}},
                    "size": {"count": 2},
                    "static": {"nodeSelector": selector},
                }
                for name, selector in (("a", {"gpu": "h100"}), ("b", {"gpu": "h100", "site": "x"}))
            ]
        ),
        "nodePools[0]",
        "selects the nodes of pool b",
    ),
    (
        "quota over capacity",
        stack(
            [kwok_pool()],
            [{"name": "t1", "quota": {"h100": {"gpus": 40}}}, {"name": "t2", "quota": {"h100": {"gpus": 40}}}],
        ),
        "nodePools[0]",
        "add up to 80, more than the pool's capacity 64",
    ),
    (
        "unknown pool",
        stack([kwok_pool()], [{"name": "t", "quota": {"h10": {"gpus": 1}}}]),
        "teams[0].quota.h10",
        "no node pool",
    ),
    (
        "lending over nominal",
        stack([kwok_pool()], [{"name": "t", "quota": {"h100": {"gpus": 8, "lendingLimit": {"gpus": 9}}}}]),
        "teams[0].quota.h100.lendingLimit.gpus",
        "must not exceed",
    ),
    (
        "unknown placement level",
        stack([kwok_pool()], queues={"placement": {"runtimes": {"torch-distributed": {"required": "rak"}}}}),
        "queues.placement.runtimes.torch-distributed.required",
        "not a level",
    ),
]


@pytest.mark.parametrize(("raw", "path", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refused_configs_name_the_path(raw: dict[str, Any], path: str, message: str) -> None:
    found = issues(raw)
    assert any(i.path == path and message in i.message for i in found), [i.render() for i in found]


def test_oversubscription_is_allowed_only_when_asked() -> None:
    teams = [{"name": f"t{i}", "quota": {"h100": {"gpus": 48}}} for i in range(2)]
    assert issues(stack([kwok_pool()], teams))
    assert issues(stack([kwok_pool()], teams, queues={"cohort": {"oversubscribe": True}})) == []


def test_limits_of_the_only_team_in_the_cohort_are_a_warning() -> None:
    """Borrowing and lending happen between the cohort's queues: the only team has nobody to borrow from or
    lend to, so its limits change nothing. Valid (a second team may come), but named with path and hint."""
    limits = {"gpus": 8, "borrowingLimit": {"gpus": 4, "cpu": "8"}, "lendingLimit": {"gpus": 2}}
    alone = [{"name": "t", "quota": {"h100": limits}}]
    warned = [w for w in validate(stack([kwok_pool()], alone)).warnings if "has no effect" in w]
    assert [w.split(":", 1)[0] for w in warned] == [
        "teams[0].quota.h100.borrowingLimit",
        "teams[0].quota.h100.lendingLimit",
    ]
    assert "(found: gpus: 4, cpu: 8)" in warned[0] and "hint: remove borrowingLimit" in warned[0]
    assert "no other queue to lend to" in warned[1]
    two = [*alone, {"name": "u", "quota": {"h100": {"gpus": 8}}}]
    assert not [w for w in validate(stack([kwok_pool()], two)).warnings if "has no effect" in w]


def test_unknown_pool_hint_and_validate_reports_totals(capsys: pytest.CaptureFixture[str]) -> None:
    found = issues(stack([kwok_pool()], [{"name": "t", "quota": {"h10": {"gpus": 1}}}]))
    assert found[0].hint == "did you mean 'h100'?"
    from trainer_infra.cli import main

    assert main(["validate", "--stack", "local"]) == 0
    out = capsys.readouterr().out
    assert "pool h100: 32 nodes; team quota/capacity: cpu 3072/3072, memory 48Ti/48Ti, nvidia.com/gpu 256/256" in out
