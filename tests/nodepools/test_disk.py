"""A node's disk holds a container at tenancy.ephemeralStorage.max wherever the platform renders the disk: Kueue
does not count node disk, so a pod asking for more than every node of its flavor offers is admitted and never gets
a node. The size follows each provisioner's reservation rule (nodepools/disk.py); an override below the minimum is
refused, and validate warns only where the platform cannot size the disk."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.nodepools.test_cloud import AKS_CLUSTER, gke_pool, gke_stack
from tests.nodepools.test_eks import eks_pool, resources, with_cluster
from tests.nodepools.test_karpenter_crds import pool as karpenter_pool
from tests.nodepools.test_karpenter_crds import rendered as karpenter_objects
from tests.pools_helpers import issues, karpenter_stack, kwok_pool, stack
from trainer_infra.nodepools.disk import HEADROOM_GIB, OFFERED, node_disk
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

BOUND: dict[str, Any] = {"tenancy": {"ephemeralStorage": {"max": "200Gi"}}}  # the default bound, spelt out


def aks_pool(**extra: Any) -> dict[str, Any]:
    return {"name": "h100", "backend": "aks", "size": {"count": 2}, "aks": {"vmSize": "Standard_ND96isr_H100_v5"}}


def disk_warnings(raw: dict[str, Any]) -> list[str]:
    return [w for w in validate(raw).warnings if "of disk" in w]


@pytest.mark.parametrize(("rule", "size", "minimum"), [("eks", 302, 224), ("gke", 412, 334), ("aks", 300, 223)])
def test_the_disk_is_the_least_whole_gib_that_holds_the_bound_plus_headroom(rule: Any, size: int, minimum: int) -> None:
    """For 200Gi: Karpenter/EKS keep 1Gi + 10% (0.9 × 302 − 1 = 270.8 ≥ 270), GKE 10% + 100Gi once the disk
    passes 268Gi (0.9 × 412 − 100 = 270.8), AKS 10%. One GiB less would not do, for either figure."""
    disk = node_disk(rule, "200Gi", None)
    assert (disk.size_gib, disk.minimum_gib, disk.override) == (size, minimum, False)
    offered = OFFERED[rule]
    assert offered(Decimal(size)) >= 200 + HEADROOM_GIB > offered(Decimal(size - 1))
    assert offered(Decimal(minimum)) >= 200 > offered(Decimal(minimum - 1))
    assert node_disk(rule, "200Gi", "1Ti").size_gib == 1024  # an override is taken as given (checked elsewhere)


def test_each_backend_renders_the_derived_disk_where_pods_storage_lives() -> None:
    al2023, bottlerocket = (
        karpenter_objects(karpenter_pool(node_class={"amiAlias": alias}))[0]["spec"]["blockDeviceMappings"]
        for alias in ("al2023@latest", "bottlerocket@1.50.0")
    )
    ebs = {"volumeSize": "302Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}
    assert al2023 == [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": ebs}]
    # Bottlerocket: the OS volume as Karpenter's own default, pods' storage on the data volume
    assert bottlerocket == [
        {"deviceName": "/dev/xvda", "ebs": {**ebs, "volumeSize": "6Gi"}},
        {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": ebs},
    ]
    [gke] = [r.args for r in build_plan(validate(gke_stack(gke_pool()))).resources]
    assert gke["node_config"]["boot_disk"] == {"size_gb": 412}
    for ami, device in (("AL2023_x86_64_NVIDIA", "/dev/xvda"), ("BOTTLEROCKET_x86_64_NVIDIA", "/dev/xvdb")):
        template = resources(with_cluster([eks_pool(amiType=ami)]))["g6-launch-template"].args
        assert template["block_device_mappings"] == [
            {
                "device_name": device,
                "ebs": {"volume_size": 302, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"},
            }
        ]
    [aks] = [r.args for r in build_plan(validate(stack([aks_pool()], cloud=AKS_CLUSTER))).resources]
    assert (aks["os_disk_size_gb"], aks["kubelet_disk_type"]) == (300, "OS")


def test_the_disk_follows_the_bound_and_the_pools_override() -> None:
    small: dict[str, Any] = {"tenancy": {"ephemeralStorage": {"defaultLimit": "10Gi", "max": "20Gi"}}}
    [gke] = [r.args for r in build_plan(validate(gke_stack(gke_pool(), **small))).resources]
    assert gke["node_config"]["boot_disk"] == {"size_gb": node_disk("gke", "20Gi", None).size_gib} == {"size_gb": 175}
    [own] = karpenter_objects(karpenter_pool() | {"disk": "1Ti"})[:1]
    assert own["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "1024Gi"


@pytest.mark.parametrize(
    ("raw", "minimum"),
    [
        (gke_stack(gke_pool(disk="300Gi")), "334Gi"),
        (with_cluster([eks_pool() | {"disk": "200Gi"}]), "224Gi"),
        (stack([aks_pool() | {"disk": "128Gi"}], cloud=AKS_CLUSTER), "223Gi"),
        (karpenter_stack([karpenter_pool() | {"disk": "100Gi"}]), "224Gi"),
    ],
)
def test_an_override_that_cannot_hold_a_container_at_the_bound_is_refused(raw: dict[str, Any], minimum: str) -> None:
    [issue] = [i for i in issues(raw) if i.path == "nodePools[0].disk"]
    assert issue.message.startswith(f"at least {minimum}") and "200Gi" in issue.message
    assert issue.found == raw["nodePools"][0]["disk"]
    assert issue.hint is not None and "tenancy.ephemeralStorage.max" in issue.hint and "the default is" in issue.hint


def test_a_bound_no_volume_can_hold_and_the_old_gke_key_are_refused_with_hints() -> None:
    huge: dict[str, Any] = {"tenancy": {"ephemeralStorage": {"max": "3Ti"}}}
    [too_big] = [i for i in issues(stack([aks_pool()], cloud=AKS_CLUSTER, **huge)) if i.path == "nodePools[0].disk"]
    assert too_big.message.startswith("at most 2048Gi") and "derived from tenancy.ephemeralStorage.max" in (
        too_big.found or ""
    )
    [moved] = [i for i in issues(gke_stack(gke_pool(gke={"diskSizeGb": 500}))) if "diskSizeGb" in i.path]
    assert moved.path == "nodePools[0].gke.diskSizeGb" and moved.hint is not None and "disk: 500Gi" in moved.hint


def test_validate_warns_only_where_the_platform_cannot_size_the_disk() -> None:
    """A node class of the user's: Karpenter's 20Gi default unless it says otherwise (declaring `disk` after checking
    its blockDeviceMappings silences it); static and kwok pools declaring less than the bound. Pools whose disk the
    platform renders, or whose disk nobody declared (static), draw none."""
    own_class = karpenter_pool(nodeClassName="gpu-default")
    [warned] = disk_warnings(karpenter_stack([own_class]))
    assert (
        warned.startswith("nodePools[0]: its nodes offer pods 20Gi of disk (karpenter's default)") and "200Gi" in warned
    )
    assert not disk_warnings(karpenter_stack([own_class | {"disk": "400Gi"}]))
    assert not disk_warnings(karpenter_stack([karpenter_pool()]))
    assert not disk_warnings(gke_stack(gke_pool()))
    static = {"name": "own", "backend": "static", "node": {"cpu": "8", "memory": "32Gi"}}
    static["static"] = {"nodeSelector": {"example.com/pool": "own"}}
    static["size"] = {"count": 1}
    assert not disk_warnings(stack([static]))
    [declared] = disk_warnings(stack([static | {"disk": "100Gi"}], **BOUND))
    assert "100Gi of disk (as declared in disk)" in declared
    [fake] = disk_warnings(stack([kwok_pool(disk="50Gi")]))
    assert "50Gi of disk" in fake
    node = next(
        o.manifest
        for o in build_plan(validate(stack([kwok_pool(disk="50Gi")]))).objects
        if o.manifest["kind"] == "Node"
    )
    assert node["status"]["allocatable"]["ephemeral-storage"] == "50Gi"
