"""An accelerator's vendor decides its node product label, and whether the kubeflow SDK can list the runtimes
that request it."""

from __future__ import annotations

from typing import Any

import pytest
from kubeflow.trainer.backends.kubernetes.utils import get_container_devices
from kubeflow_trainer_api import models

from tests.helpers import render
from tests.pools_helpers import issues, kwok_pool, stack
from trainer_infra.catalog.config import sdk_knows_device
from trainer_infra.stack.validate import validate


def _pool(resource: str, **accelerator: Any) -> dict[str, Any]:
    pool = kwok_pool("mi300", gpus=8)
    pool["node"]["accelerator"].update(resource=resource, product="AMD_Instinct_MI300X_OAM", **accelerator)
    return pool


def _node_labels(raw: dict[str, Any]) -> dict[str, str]:
    nodes = [m for m in render(raw).manifests if m["kind"] == "Node"]
    assert nodes
    return dict(nodes[0]["metadata"]["labels"])


def test_the_product_label_follows_the_vendor_unless_set() -> None:
    amd = _node_labels(stack([_pool("amd.com/gpu")]))
    assert amd["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
    assert not [k for k in amd if k.startswith("nvidia.com/")]
    assert "nvidia.com/gpu.product" in _node_labels(stack([_pool("nvidia.com/gpu")]))
    custom = _node_labels(stack([_pool("amd.com/gpu", productLabel="example.com/product")]))
    assert custom["example.com/product"] == "AMD_Instinct_MI300X_OAM" and "amd.com/gpu.product-name" not in custom
    (issue,) = issues(stack([_pool("vendor.example.com/npu")]))
    assert issue.path == "nodePools[0].node.accelerator" and "productLabel" in issue.message


@pytest.mark.parametrize(
    "limits",
    [
        None,
        {"nvidia.com/gpu": "2"},
        {"amd.com/gpu": "2"},
        {"amd.com/gpu": "2", "cpu": "8"},
        {"nvidia.com/mig-1g.5gb": "1"},
    ],
)
def test_the_device_rule_is_the_sdks(limits: dict[str, str] | None) -> None:
    """sdk_knows_device answers as the installed SDK's get_container_devices does (raises = unknown); no
    limits reach the SDK as none at all (the API server omits an empty map)."""
    requirements = models.IoK8sApiCoreV1ResourceRequirements.from_dict({"limits": limits} if limits else {})
    try:
        get_container_devices(requirements)
        sdk_ok = True
    except Exception as exc:
        assert "Unknown device type" in str(exc)
        sdk_ok = False
    assert sdk_knows_device(limits or {}) == sdk_ok


def test_validate_warns_that_the_sdk_cannot_list_runtimes_asking_for_an_amd_gpu() -> None:
    raw = stack([_pool("amd.com/gpu")], teams=[{"name": "a", "quota": {"mi300": {"gpus": 8}}}])
    (warning,) = [w for w in validate(raw).warnings if "kubeflow SDK" in w]
    assert "torchtune-llama3.2-1b (amd.com/gpu)" in warning and "Unknown device type" in warning
    assert "torch-distributed " not in warning, "a runtime without limits lists fine"
    raw["runtimes"] = {
        "overrides": {
            name: {"resources": {"limits": {"nvidia.com/gpu": 2, "cpu": 8}, "requests": {"cpu": 8}}}
            for name in ("torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b")
        }
    }
    assert [w for w in validate(raw).warnings if "kubeflow SDK" in w] == []
