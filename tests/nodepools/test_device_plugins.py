"""The platform installs the device plugins a pool's node image lacks, from their official charts, on exactly
those pools' nodes; a stack whose pools need none installs neither."""

from __future__ import annotations

from typing import Any

from tests.helpers import render
from tests.nodepools.test_karpenter_crds import pool
from tests.pools_helpers import karpenter_stack, kwok_pool


def releases(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in render(raw).releases}


def test_an_al2023_efa_pool_gets_both_plugins_on_its_nodes_only() -> None:
    efa = pool(efa=True)
    bottlerocket = {**pool(node_class={"amiAlias": "bottlerocket@1.50.0"}), "name": "br"}
    found = releases(karpenter_stack([efa, bottlerocket, kwok_pool()]))
    nvidia, plugin = found["nvidia-device-plugin"], found["aws-efa-k8s-device-plugin"]
    assert (nvidia["chart"], nvidia["version"]) == ("nvidia-device-plugin", "0.20.0")
    assert nvidia["repository"] == "https://nvidia.github.io/k8s-device-plugin"
    terms = nvidia["values"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    # the Bottlerocket pool's AMI runs NVIDIA's plugin itself; kwok nodes are fake
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["p5"]
    assert nvidia["values"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert nvidia["values"]["image"] == {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"}
    assert (plugin["chart"], plugin["version"]) == ("aws-efa-k8s-device-plugin", "v0.5.30")


def test_pools_that_need_no_plugin_install_none() -> None:
    found = releases(karpenter_stack([kwok_pool(), {**pool(node_class={"amiAlias": "bottlerocket@1.50.0"})}]))
    assert not {"nvidia-device-plugin", "aws-efa-k8s-device-plugin"} & set(found)
