"""The parts of the Karpenter e2e that need no cluster: its build target and what is handed to Karpenter."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from trainer_infra.core.upstream import karpenter
from trainer_infra.sandbox import build as build_module
from trainer_infra.sandbox import karpenter_kwok
from trainer_infra.sandbox.build import Builder, Target
from trainer_infra.sandbox.versions import VersionSet


def recording_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Builder, list[str]]:
    builder, built = Builder(VersionSet(), root=tmp_path), []
    real = builder.targets()

    def record(_: Builder, target: Target) -> None:
        built.append(target.name)

    monkeypatch.setattr(builder, "targets", lambda: [dataclasses.replace(t, build=record) for t in real])
    monkeypatch.setattr(build_module, "go_problem", lambda: None)
    return builder, built


def test_karpenter_is_built_only_for_the_test_that_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builder, built = recording_builder(tmp_path, monkeypatch)
    builder.build()
    assert "kueue-manager" in built and karpenter_kwok.BINARY not in built
    built.clear()
    builder.build(opt_in=frozenset({karpenter_kwok.BINARY}))
    assert karpenter_kwok.BINARY in built


def test_only_the_karpenter_build_takes_the_newer_go(tmp_path: Path) -> None:
    builder = Builder(VersionSet(), root=tmp_path)
    targets = {t.name: t for t in builder.targets()}
    target = targets[karpenter_kwok.BINARY]
    assert (target.component, target.version) == ("karpenter", karpenter.CORE_VERSION)
    assert [t.name for t in targets.values() if t.toolchain] == [karpenter_kwok.BINARY]
    assert builder.go_env(toolchain=target.toolchain)["GOTOOLCHAIN"] == karpenter.CORE_TOOLCHAIN
    assert builder.go_env()["GOTOOLCHAIN"] == "local"


NODE_POOL: dict[str, Any] = {
    "apiVersion": karpenter.NODEPOOL_API,
    "kind": "NodePool",
    "metadata": {"name": "h100"},
    "spec": {
        "template": {
            "metadata": {"labels": {"trainer-platform.io/node-pool": "h100"}},
            "spec": {
                "nodeClassRef": {"group": karpenter.AWS_GROUP, "kind": "EC2NodeClass", "name": "h100"},
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            },
        },
        "limits": {"nvidia.com/gpu": "16"},
    },
}
NODE_CLASS = {"apiVersion": karpenter.EC2_NODECLASS_API, "kind": "EC2NodeClass", "metadata": {"name": "h100"}}


def test_on_kwok_changes_only_the_node_class_reference() -> None:
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nlp"}}
    out = karpenter_kwok.on_kwok([team, NODE_CLASS, NODE_POOL])
    assert [o["kind"] for o in out] == ["Namespace", "NodePool", karpenter.KWOK_NODECLASS_KIND]
    pool = copy.deepcopy(out[1])
    assert pool["spec"]["template"]["spec"].pop("nodeClassRef") == {
        "group": karpenter.KWOK_GROUP,
        "kind": karpenter.KWOK_NODECLASS_KIND,
        "name": "h100",
    }
    expected = copy.deepcopy(NODE_POOL)
    del expected["spec"]["template"]["spec"]["nodeClassRef"]
    assert pool == expected
    assert out[2] == {
        "apiVersion": karpenter.KWOK_NODECLASS_API,
        "kind": karpenter.KWOK_NODECLASS_KIND,
        "metadata": {"name": "h100"},
    }
    assert NODE_POOL["spec"]["template"]["spec"]["nodeClassRef"]["group"] == karpenter.AWS_GROUP  # input untouched


def test_the_fake_cloud_offers_the_instance_type_as_ec2_publishes_it() -> None:
    [p5] = karpenter_kwok.instance_types(["p5.48xlarge"], ["on-demand", "spot"], "302Gi")
    assert p5["resources"] == {
        "cpu": "192",
        "memory": "2048Gi",
        "pods": "100",
        "nvidia.com/gpu": "8",
        # the rendered EC2NodeClass's disk: a team pod requests ephemeral-storage and fits only with one
        "ephemeral-storage": "302Gi",
    }
    capacity_types = [o["Requirements"][0]["values"] for o in p5["offerings"]]
    assert capacity_types == [["on-demand"], ["spot"]]
    with pytest.raises(KeyError, match="not in the eks machine table"):
        karpenter_kwok.instance_types(["p9.fictional"], ["on-demand"], "20Gi")


def test_the_fake_cloud_reports_the_disk_karpenter_reads_from_the_node_class() -> None:
    """The rootVolume mapping's size, as Karpenter's AWS provider takes it; its 20Gi default without mappings."""
    os_volume: dict[str, Any] = {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "6Gi"}}
    data_volume = {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "302Gi"}}
    bottlerocket = {"spec": {"blockDeviceMappings": [os_volume, data_volume]}}
    assert karpenter_kwok.node_class_disk(bottlerocket) == "302Gi"
    assert karpenter_kwok.node_class_disk({"spec": {}}) == karpenter.DEFAULT_NODE_DISK == "20Gi"
