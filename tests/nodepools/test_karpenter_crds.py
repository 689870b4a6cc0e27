"""Every shape the karpenter backend renders passes Karpenter's own CRDs (OpenAPI schema and CEL rules) as the API
server would check them on create: the NodePool against sigs.k8s.io/karpenter v1.15.0 and against the copy
karpenter-provider-aws v1.15.2 installs (AWS's label rules added), the EC2NodeClass against v1.15.2. The CRDs come
from the Go modules through the module proxy, checked against their go.sum hashes (tests/conformance/crds.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conformance.crds import KARPENTER_MODULES, karpenter_crds
from tests.conformance.schema import SchemaValidator
from tests.pools_helpers import karpenter_stack
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

NODE_CLASS = {"role": "KarpenterNodeRole-ml", "subnetTags": {"karpenter.sh/discovery": "ml"}}
NODE_CLASS["securityGroupTags"] = {"karpenter.sh/discovery": "ml"}


def pool(
    capacity_type: str = "on-demand",
    node_class: dict[str, Any] | None = None,
    topology: list[str] | None = None,
    **karpenter: Any,
) -> Any:
    settings: dict[str, Any] = {"instanceTypes": ["p5.48xlarge"], **karpenter}
    if "nodeClassName" not in karpenter:
        settings["nodeClass"] = {**NODE_CLASS, **(node_class or {})}
    return {
        "name": "p5",
        "backend": "karpenter",
        "node": {"cpu": "190", "memory": "1900Gi", "accelerator": {"count": 8, "product": "NVIDIA-H100-80GB-HBM3"}},
        "size": {"max": 4},
        "capacityType": capacity_type,
        "labels": {"example.com/team-tier": "gold"},
        "karpenter": settings,
        **({"topology": topology} if topology else {}),
    }


SHAPES = {
    "on-demand": pool(),
    "spot": pool("spot", instanceTypes=["p5.48xlarge", "p5e.48xlarge"], consolidateAfter="Never"),
    "existing node class": pool(nodeClassName="gpu-default"),
    "reserved (ODCR by id)": pool("reserved", {"capacityReservations": [{"id": "cr-0123456789abcdef0"}]}),
    "reserved (tags of another account)": pool(
        "reserved", {"capacityReservations": [{"tags": {"team": "ml"}, "ownerId": "123456789012"}]}
    ),
    "capacity block": pool("reserved", {"capacityReservations": [{"id": "cr-0a1b2c3d4e5f60718"}]}, capacityBlock=True),
    "efa in a placement group (name)": pool(
        node_class={"placementGroup": "ml-cluster-pg", "amiAlias": "al2023@v20251101"}, efa=True
    ),
    "efa in a placement group (id), bottlerocket": pool(
        node_class={"placementGroup": "pg-0123456789abcdef0", "amiAlias": "bottlerocket@1.50.0"}, efa=True
    ),
    "a disk of its own, al2": {**pool(node_class={"amiAlias": "al2@latest"}), "disk": "1Ti"},
}


def rendered(raw: dict[str, Any]) -> list[dict[str, Any]]:
    plan = build_plan(validate(karpenter_stack([raw])))
    return [o.manifest for o in plan.objects if o.manifest["apiVersion"].startswith("karpenter.")]


def violations(obj: dict[str, Any], module: str) -> list[str]:
    schemas = karpenter_crds(module)
    entry = schemas.get((obj["apiVersion"], obj["kind"]))
    assert entry is not None, f"{module} has no CRD for {obj['kind']}"
    assert entry["scope"] == "Cluster" and "namespace" not in obj["metadata"]
    return SchemaValidator().validate(obj, entry["schema"])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_rendered_shape_passes_the_karpenter_crds(shape: str) -> None:
    objects = rendered(SHAPES[shape])
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == (["NodePool"] if shape == "existing node class" else ["EC2NodeClass", "NodePool"])
    for obj in objects:
        modules = KARPENTER_MODULES if obj["kind"] == "NodePool" else ["github.com/aws/karpenter-provider-aws"]
        for module in modules:
            assert violations(obj, module) == [], (shape, module, obj["kind"])


def test_the_rendered_fields_are_the_ones_karpenter_reads() -> None:
    node_class, node_pool = sorted(rendered(SHAPES["capacity block"]), key=lambda o: o["kind"])
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0a1b2c3d4e5f60718"}]
    requirements = node_pool["spec"]["template"]["spec"]["requirements"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]} in requirements
    assert {"key": "karpenter.k8s.aws/capacity-reservation-type", "operator": "In", "values": ["capacity-block"]} in (
        requirements
    )
    other_account = rendered(SHAPES["reserved (tags of another account)"])[0]
    assert other_account["spec"]["capacityReservationSelectorTerms"] == [
        {"tags": {"team": "ml"}, "ownerID": "123456789012"}
    ]
    by_id = rendered(SHAPES["efa in a placement group (id), bottlerocket"])[0]
    assert by_id["spec"]["placementGroupSelector"] == {"id": "pg-0123456789abcdef0"}


def test_the_crd_check_catches_what_karpenter_refuses() -> None:
    """Not a vacuous pass: a misspelt field, a restricted label (CEL), a reservation term naming both an ID and
    tags (CEL) and two root volumes (CEL) are each refused by the same check."""
    node_class, node_pool = sorted(rendered(SHAPES["reserved (ODCR by id)"]), key=lambda o: o["kind"])
    aws = "github.com/aws/karpenter-provider-aws"
    misspelt = copy.deepcopy(node_class)
    misspelt["spec"]["capacityReservationSelectorTerms"] = [{"tags": {"a": "b"}, "ownerId": "123456789012"}]
    assert any("ownerId: unknown field" in v for v in violations(misspelt, aws))
    both = copy.deepcopy(node_class)
    both["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-0123456789abcdef0", "tags": {"a": "b"}}]
    assert any("mutually exclusive" in v for v in violations(both, aws))
    two_roots = copy.deepcopy(node_class)
    two_roots["spec"]["blockDeviceMappings"] *= 2
    assert any("only one blockDeviceMappings with rootVolume" in v for v in violations(two_roots, aws))
    restricted = copy.deepcopy(node_pool)
    restricted["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/instance-size"] = "x"
    restricted["spec"]["template"]["metadata"]["labels"]["karpenter.k8s.aws/made-up"] = "x"
    found = violations(restricted, aws)
    assert any('label domain "karpenter.k8s.aws" is restricted' in v for v in found), found
