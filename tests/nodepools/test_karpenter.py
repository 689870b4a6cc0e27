"""The karpenter backend refuses what Karpenter would accept but never launch: reserved capacity without
reservations, reservations on spot, EFA on an instance type without it, topology levels its nodes never carry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.nodepools.test_karpenter_crds import pool
from tests.pools_helpers import issues, karpenter_stack, stack
from trainer_infra.cli import main
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.queues.capacity import capacity_lines
from trainer_infra.stack.validate import validate

ODCR = {"capacityReservations": [{"id": "cr-0123456789abcdef0"}]}

BAD: list[tuple[str, dict[str, Any], str, str, str]] = [
    # (what, pool, path, message, text both values show)
    (
        "reserved without selector terms",
        pool("reserved"),
        "nodePools[0].karpenter.nodeClass.capacityReservations",
        "launches nothing without capacity reservation selector terms",
        "capacityType: reserved, capacityReservations: []",
    ),
    (
        "reserved on a node class the platform cannot see",
        pool("reserved", nodeClassName="gpu-default"),
        "nodePools[0].karpenter.nodeClassName",
        "needs capacityReservationSelectorTerms",
        "nodeClassName: gpu-default",
    ),
    (
        "a reservation on spot",
        pool("spot", ODCR),
        "nodePools[0].karpenter.nodeClass.capacityReservations",
        "only launched into by capacityType reserved, not spot",
        "capacityType: spot, capacityReservations: 1 term(s)",
    ),
    (
        "a capacity block on demand",
        pool(capacityBlock=True),
        "nodePools[0].karpenter.capacityBlock",
        "Capacity Blocks are reserved capacity",
        "capacityType: on-demand, capacityBlock: true",
    ),
    (
        "efa on an instance type without it",
        pool(efa=True, instanceTypes=["p5.48xlarge", "g6.4xlarge"]),
        "nodePools[0].karpenter.instanceTypes[1]",
        "has no EFA interfaces",
        "efa: true, instance type g6.4xlarge",
    ),
    (
        "network layers on a type EC2 gives no topology",
        pool(instanceTypes=["g5.48xlarge"]),
        "nodePools[0].topology",
        "EC2 reports no such network layer",
        "topology.k8s.aws/network-node-layer-1, topology.k8s.aws/network-node-layer-2, "
        "topology.k8s.aws/network-node-layer-3 on g5.48xlarge",
    ),
    (
        "a fourth layer on a three-layer type",
        pool(topology=["topology.k8s.aws/network-node-layer-4", "kubernetes.io/hostname"]),
        "nodePools[0].topology",
        "EC2 reports no such network layer",
        "topology.k8s.aws/network-node-layer-4 on p5.48xlarge",
    ),
    (
        "the reservation level on on-demand nodes",
        pool(topology=["karpenter.k8s.aws/capacity-reservation-id", "kubernetes.io/hostname"]),
        "nodePools[0].topology",
        "only nodes on reserved capacity carry the reservation label",
        "capacityType: on-demand",
    ),
    (
        "the placement-group level without a placement group",
        pool(topology=["karpenter.k8s.aws/placement-group-id", "kubernetes.io/hostname"]),
        "nodePools[0].topology",
        "only nodes launched into a placement group carry its label",
        "karpenter.k8s.aws/placement-group-id",
    ),
    (
        "a level no provisioner sets",
        pool(topology=["topology.k8s.aws/capacity-block-id", "kubernetes.io/hostname"]),
        "nodePools[0].topology",
        "Karpenter nodes do not carry these labels",
        "topology.k8s.aws/capacity-block-id",
    ),
]


@pytest.mark.parametrize(("raw", "path", "message", "found"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refused_with_path_both_values_and_a_hint(raw: dict[str, Any], path: str, message: str, found: str) -> None:
    matching: list[ConfigIssue] = [i for i in issues(karpenter_stack([raw])) if i.path == path and message in i.message]
    assert matching, [i.render() for i in issues(karpenter_stack([raw]))]
    assert found in (matching[0].found or ""), matching[0].render()
    assert matching[0].hint


def test_reservation_terms_name_one_selector() -> None:
    both = pool("reserved", {"capacityReservations": [{"id": "cr-0123456789abcdef0", "tags": {"a": "b"}}]})
    assert any("exactly one of id, tags" in i.message for i in issues(karpenter_stack([both])))
    owner_with_id = pool("reserved", {"capacityReservations": [{"id": "cr-0123", "ownerId": "123456789012"}]})
    assert any("ownerId goes with tags" in i.message for i in issues(karpenter_stack([owner_with_id])))


def test_four_layer_types_and_reserved_levels_are_accepted() -> None:
    b200 = pool(
        "reserved",
        ODCR,
        instanceTypes=["p6-b200.48xlarge"],
        topology=[
            "karpenter.k8s.aws/capacity-reservation-id",
            "topology.k8s.aws/network-node-layer-3",
            "topology.k8s.aws/network-node-layer-4",
            "kubernetes.io/hostname",
        ],
    )
    assert issues(karpenter_stack([b200])) == []
    g5 = pool(instanceTypes=["g5.48xlarge"], topology=["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
    assert issues(karpenter_stack([g5])) == []


def test_the_cli_exits_2_naming_the_reservation_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = karpenter_stack([pool("reserved")])
    path = tmp_path / "Pulumi.eks-bad.yaml"
    path.write_text(yaml.safe_dump({"config": {f"trainer-platform:{k}": v for k, v in raw.items()}}))
    assert main(["validate", "--config-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nodePools[0].karpenter.nodeClass.capacityReservations" in err
    assert "hint: name the reservations" in err and "Traceback" not in err


def test_under_tas_a_karpenter_pool_is_refused_with_what_to_change() -> None:
    """Karpenter scales from zero for pending pods; under TAS Kueue admits (and so creates pods) only onto nodes that
    exist, and Karpenter answers no ProvisioningRequest: no job could ever be admitted onto the pool."""
    (issue,) = issues(stack([pool()]))  # topology-aware scheduling is on by default
    assert issue.path == "nodePools[0].size" and issue.found == "min 0, max 4"
    assert "topology-aware scheduling admits only onto nodes that exist" in issue.message
    assert issue.hint is not None and "components.kueue.tas.enabled: false" in issue.hint
    assert "Karpenter launches nodes only for pending pods" in issue.hint
    assert issues(karpenter_stack([pool()])) == []


def test_validate_says_a_karpenter_pool_scales_from_zero_to_its_max() -> None:
    validated = validate(karpenter_stack([pool()]))
    [line, *_] = capacity_lines(validated.config.teams, validated.config.queues, validated.queues)
    assert line.startswith("pool p5: up to 4 nodes (autoscaling 0..4, quotas count the max)"), line


def test_an_efa_pool_counts_its_interfaces_in_the_nodepool_limits_and_the_queues() -> None:
    validated = validate(karpenter_stack([pool(efa=True)], [{"name": "t", "quota": {"p5": {"gpus": 16}}}]))
    [p5] = validated.pools
    assert p5.per_node["vpc.amazonaws.com/efa"] == 32  # p5.48xlarge: Karpenter attaches all 32 interfaces
    assert p5.capacity["vpc.amazonaws.com/efa"] == 128  # its NodePool limits: size.max 4
    assert "vpc.amazonaws.com/efa" in validated.queues.covered
    assert validated.queues.teams["t"]["p5"].nominal["vpc.amazonaws.com/efa"] == 64
