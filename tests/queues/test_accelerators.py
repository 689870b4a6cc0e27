"""Vendor-neutral accelerators: every toleration, quota and policy comes from each pool's declared
accelerator resource and taints, never from a hard-coded `nvidia.com/gpu`."""

from __future__ import annotations

import copy
from typing import Any

from tests.helpers import render
from tests.pools_helpers import issues, kwok_pool, stack
from trainer_infra.policy_rules import RULES, check
from trainer_infra.policy_rules.model import Subject
from trainer_infra.render.enforce import check_rendered

AMD_TAINT = {"key": "vendor.example.com/amd", "value": "mi300", "effect": "NoSchedule"}


def _amd_pool(**extra: Any) -> dict[str, Any]:
    pool = kwok_pool("mi300", gpus=8, **extra)
    pool["node"]["accelerator"]["resource"] = "amd.com/gpu"
    pool["node"]["accelerator"]["productLabel"] = "amd.com/gpu.product-name"
    return pool


def _tolerations(runtime: dict[str, Any]) -> list[list[dict[str, Any]]]:
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return [j["template"]["spec"]["template"]["spec"].get("tolerations", []) for j in jobs]


def _requests(runtime: dict[str, Any]) -> set[str]:
    return {
        k
        for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        for c in j["template"]["spec"]["template"]["spec"]["containers"]
        for section in ("limits", "requests")
        for k in (c.get("resources") or {}).get(section, {})
    }


def test_an_amd_pool_with_its_own_taint_gets_amd_quota_tolerations_and_requests() -> None:
    raw = stack([_amd_pool(taints=[AMD_TAINT])], teams=[{"name": "a", "quota": {"mi300": {"gpus": 16}}}])
    rendered = render(raw)
    cq = next(m for m in rendered.manifests if m["kind"] == "ClusterQueue")
    assert "amd.com/gpu" in cq["spec"]["resourceGroups"][0]["coveredResources"]
    flavor = next(m for m in rendered.manifests if m["kind"] == "ResourceFlavor")
    assert {"key": AMD_TAINT["key"], "operator": "Equal", "value": "mi300", "effect": "NoSchedule"} in flavor["spec"][
        "tolerations"
    ]
    tune = next(m for m in rendered.manifests if m["metadata"]["name"] == "torchtune-llama3.2-1b")
    assert "amd.com/gpu" in _requests(tune) and "nvidia.com/gpu" not in _requests(tune)
    keys = {t["key"] for tols in _tolerations(tune) for t in tols}
    assert AMD_TAINT["key"] in keys and "nvidia.com/gpu" not in keys, keys
    assert check_rendered(rendered) == []


def test_the_default_pool_taint_is_keyed_by_its_accelerator() -> None:
    rendered = render(stack([_amd_pool()], teams=[{"name": "a", "quota": {"mi300": {"gpus": 8}}}]))
    flavor = next(m for m in rendered.manifests if m["kind"] == "ResourceFlavor")
    assert [t["key"] for t in flavor["spec"]["tolerations"] if t["key"].endswith("/gpu")] == ["amd.com/gpu"]


def test_without_pools_an_accelerator_is_tolerated_by_its_own_resource_key() -> None:
    rendered = render(stack([]))
    tune = next(m for m in rendered.manifests if m["metadata"]["name"] == "torchtune-llama3.2-1b")
    node = _tolerations(tune)[-1]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in node


def _subject(manifest: dict[str, Any]) -> Subject:
    group_version = manifest["apiVersion"] if "/" in manifest["apiVersion"] else "core/" + manifest["apiVersion"]
    return Subject(f"kubernetes:{group_version}:{manifest['kind']}", manifest["metadata"]["name"], manifest)


def test_policy_wants_the_taints_of_a_pool_offering_the_accelerator_whatever_the_vendor() -> None:
    raw = stack([_amd_pool(taints=[AMD_TAINT])], teams=[{"name": "a", "quota": {"mi300": {"gpus": 16}}}])
    rendered = render(raw)
    subjects = [_subject(m) for m in rendered.manifests]
    rule = next(r for r in RULES if r.name == "gpu-runtimes-tolerate-gpu-taint")
    assert rule.check(subjects) == []
    stripped = copy.deepcopy(rendered.manifests)
    for m in stripped:
        if m["kind"] == "ClusterTrainingRuntime":
            for j in m["spec"]["template"]["spec"]["replicatedJobs"]:
                j["template"]["spec"]["template"]["spec"]["tolerations"] = [
                    {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ]
    found = rule.check([_subject(m) for m in stripped])
    assert found and all("uses amd.com/gpu but tolerates the taints of no pool offering it" in v.message for v in found)
    assert check([_subject(m) for m in stripped]) != []


def test_an_amd_only_platform_tells_members_to_request_its_own_gpus() -> None:
    """A pod refused for asking devices through resourceClaims is told what to ask instead: the resource this
    platform's pools offer (on an AMD-only platform, `amd.com/gpu`; `nvidia.com/gpu` would never be admitted)."""
    raw = stack([_amd_pool(taints=[AMD_TAINT])], teams=[{"name": "a", "quota": {"mi300": {"gpus": 16}}}])
    policies = [m for m in render(raw).manifests if m["kind"] == "ValidatingAdmissionPolicy"]
    messages = [v["message"] for p in policies for v in p["spec"]["validations"]]
    claims = [m for m in messages if "resourceClaims" in m]
    assert claims and all(m.endswith("Request GPUs as resources (amd.com/gpu)") for m in claims)
    assert not [m for m in messages if "nvidia.com/gpu" in m]


def test_an_untainted_amd_pool_is_told_the_taint_it_would_get() -> None:
    found = [i for i in issues(stack([_amd_pool(taints=[])])) if i.path == "nodePools[0].taints"]
    assert [i.hint for i in found] == ["drop `taints: []` to get amd.com/gpu=present:NoSchedule"]
