"""The per-pod PID limit (`nodePools[].podPidsLimit`): every node the platform makes or configures carries it through
its maker's own kubelet setting (GKE kubeletConfig, AKS kubeletConfig, the EKS launch template's user data,
Karpenter's EC2NodeClass, the sandbox's real node); for nodes it does not configure, validate says what to set; a
limit a training pod cannot live with is refused."""

from __future__ import annotations

import base64
import copy
import email
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.helpers import render, stack_raw
from tests.nodepools.test_cloud import gke_pool, gke_stack
from tests.nodepools.test_karpenter_crds import pool as karpenter_pool
from tests.pools_helpers import issues, karpenter_stack, kwok_pool, stack
from trainer_infra.cli import main
from trainer_infra.nodepools import pids
from trainer_infra.sandbox.chart_sandbox import REAL_NODE
from trainer_infra.sandbox.node import RealNode
from trainer_infra.sandbox.platform_sandbox import real_node_pids, sandbox_stack
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

Obj = dict[str, Any]


def _inputs(raw: Obj, type_token: str) -> dict[str, Obj]:
    """The rendered resources of one type (the real program under mocks), by name: their inputs."""
    return {r["name"]: r["inputs"] for r in render(raw).resources if r["type"] == type_token}


def _with_limit(raw: Obj, limit: int, index: int = 0) -> Obj:
    raw = copy.deepcopy(raw)
    raw["nodePools"][index]["podPidsLimit"] = limit
    return raw


def test_gke_node_pools_carry_it_in_their_kubelet_config() -> None:
    pools = _inputs(gke_stack(gke_pool(), gke_pool("big", podPidsLimit=16384)), "gcp:container/nodePool:NodePool")
    assert pools["gke-h100"]["nodeConfig"]["kubeletConfig"] == {"podPidsLimit": pids.DEFAULT}
    assert pools["gke-big"]["nodeConfig"]["kubeletConfig"] == {"podPidsLimit": 16384}


def test_aks_agent_pools_carry_it_in_their_kubelet_config() -> None:
    pools = _inputs(_with_limit(stack_raw("aks"), 8192), "azure-native:containerservice:AgentPool")
    assert pools["aks-h100"]["kubeletConfig"] == {"podMaxPids": 8192}
    assert pools["aks-a100spot"]["kubeletConfig"] == {"podMaxPids": pids.DEFAULT}


def _node_config(user_data: str) -> Obj:
    """The nodeadm NodeConfig of an AL2023 user data (base64 of a MIME multi-part document)."""
    message = email.message_from_bytes(base64.b64decode(user_data))
    assert message.is_multipart()
    parts = [p for p in message.walk() if p.get_content_type() == pids.NODEADM_CONTENT_TYPE]
    assert len(parts) == 1
    config: Obj = yaml.safe_load(str(parts[0].get_payload()))
    assert (config["apiVersion"], config["kind"]) == (pids.NODEADM_API, "NodeConfig")
    return config


def test_every_eks_node_group_gets_a_launch_template_whose_user_data_sets_it() -> None:
    raw = _with_limit(stack_raw("eks"), 8192)
    templates = _inputs(raw, "aws:ec2/launchTemplate:LaunchTemplate")
    groups = _inputs(raw, "aws:eks/nodeGroup:NodeGroup")
    assert set(groups) == {"h100", "l4"}
    for name, limit in (("h100", 8192), ("l4", pids.DEFAULT)):
        assert groups[name]["launchTemplate"]["id"] == f"{name}-launch-template-id"
        config = _node_config(templates[f"{name}-launch-template"]["userData"])
        assert config["spec"] == {"kubelet": {"config": {"podPidsLimit": limit}}}


def test_a_bottlerocket_node_group_gets_it_as_toml_settings() -> None:
    raw = copy.deepcopy(stack_raw("eks"))
    raw["nodePools"][1]["eks"]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    templates = _inputs(raw, "aws:ec2/launchTemplate:LaunchTemplate")
    settings = tomllib.loads(base64.b64decode(templates["l4-launch-template"]["userData"]).decode())
    assert settings == {"settings": {"kubernetes": {"pod-pids-limit": pids.DEFAULT}}}


def _node_class(raw: Obj) -> Obj:
    classes = [o.manifest for o in build_plan(validate(raw)).objects if o.manifest["kind"] == "EC2NodeClass"]
    assert len(classes) == 1
    spec: Obj = classes[0]["spec"]
    return spec


def test_karpenter_node_classes_carry_it_in_spec_kubelet_and_bottlerocket_user_data() -> None:
    al2023 = _node_class(karpenter_stack([{**karpenter_pool(), "podPidsLimit": 2048}]))
    assert al2023["kubelet"] == {"podPidsLimit": 2048} and "userData" not in al2023
    bottlerocket = _node_class(karpenter_stack([karpenter_pool(node_class={"amiAlias": "bottlerocket@1.50.0"})]))
    assert bottlerocket["kubelet"] == {"podPidsLimit": pids.DEFAULT}
    assert tomllib.loads(bottlerocket["userData"]) == {"settings": {"kubernetes": {"pod-pids-limit": pids.DEFAULT}}}


STATIC = {
    "name": "onprem",
    "backend": "static",
    "node": {"cpu": "64", "memory": "512Gi", "accelerator": {"count": 8}},
    "static": {
        "nodes": [{"name": "gpu-0", "topology": {"trainer-platform.io/block": "b", "trainer-platform.io/rack": "r"}}]
    },
}


def test_validate_says_what_to_set_where_the_platform_does_not_configure_the_kubelet() -> None:
    raw = karpenter_stack([STATIC, karpenter_pool(nodeClassName="gpu-default"), kwok_pool()])
    warnings = [w for w in validate(raw).warnings if "podPidsLimit" in w]
    assert warnings == [
        pids.unmanaged_warning("nodePools[0]", pids.DEFAULT),
        pids.unmanaged_warning("nodePools[1]", pids.DEFAULT),
    ]
    assert "podPidsLimit: 4096" in warnings[0] and "--pod-max-pids=4096" in warnings[0]


@pytest.mark.parametrize(("limit", "words"), [(512, f"at least {pids.FLOOR}"), (1 << 22, f"at most {pids.CEILING}")])
def test_a_limit_a_pod_cannot_live_with_is_refused_with_the_path(limit: int, words: str) -> None:
    [issue] = issues(stack([kwok_pool(podPidsLimit=limit)]))
    assert issue.path == "nodePools[0].podPidsLimit" and words in issue.message
    assert issue.found == str(limit) and issue.hint


def test_the_cli_exits_2_on_a_too_small_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = stack([kwok_pool(podPidsLimit=100)])
    path = tmp_path / "Pulumi.pids-bad.yaml"
    path.write_text(yaml.safe_dump({"config": {f"trainer-platform:{k}": v for k, v in raw.items()}}))
    assert main(["validate", "--config-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nodePools[0].podPidsLimit" in err and "(found: 100)" in err and f"default {pids.DEFAULT}" in err
    assert "Traceback" not in err


def test_the_sandbox_real_node_takes_it_from_the_stack_it_runs(tmp_path: Path) -> None:
    doc = sandbox_stack()
    [pool] = doc["config"]["trainer-platform:nodePools"]
    assert pool["static"]["nodes"][0]["name"] == REAL_NODE
    assert real_node_pids(doc) == pool["podPidsLimit"]
    pool["podPidsLimit"] = 5000
    assert real_node_pids(doc) == 5000
    sandbox: Any = SimpleNamespace(ca=SimpleNamespace(cert_path=tmp_path / "ca.crt"))
    node = RealNode(sandbox, tmp_path, registry_hosts={}, registry_ca=tmp_path, sandbox_image="", pod_pids_limit=5000)
    assert node.kubelet_config()["podPidsLimit"] == 5000
