"""What a stack serves from the catalog: selection, overrides, injections, versions and protection."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, ROOT, crd_versions, render, resource, stack_raw
from tests.sdk_harness import FakeCluster, sdk_against
from trainer_infra.catalog.loader import load_catalog
from trainer_infra.catalog.webhook import runtime_findings
from trainer_infra.core.errors import ConfigError
from trainer_infra.manifests.runtime import images_of
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

CATALOG = ROOT / "runtimes"
# How a stack turns the Trainer data cache on (served with the `data-cache` runtimes).
DATA_CACHE_ON: dict[str, Any] = {"dataCache": {"enabled": True}}
TORCHTUNE = ("torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b")


def runtimes(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    plan = build_plan(validate(raw))
    return {o.manifest["metadata"]["name"]: o.manifest for o in plan.objects if "TrainingRuntime" in o.manifest["kind"]}


def issues(raw: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    with pytest.raises(ConfigError) as info:
        build_plan(validate(raw))
    return [(i.path, i.message, i.hint) for i in info.value.issues]


def containers(runtime: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        c
        for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        for c in job["template"]["spec"]["template"]["spec"]["containers"]
    ]


def test_default_serves_every_runtime_the_trainer_version_supports() -> None:
    catalog = set(load_catalog(CATALOG).names())
    assert set(runtimes(MINIMAL)) == catalog - {"torch-distributed-with-cache"}
    with_cache = {**MINIMAL, **DATA_CACHE_ON}
    assert set(runtimes(with_cache)) == catalog
    trainer = next(r for r in render(with_cache).releases if r["name"] == "trainer")
    data_cache = trainer["values"]["dataCache"]
    assert data_cache["enabled"] is True, "the runtime is served only with the controller side"
    assert data_cache["runtimes"]["torchDistributedWithCache"] == {"enabled": False}, "the catalog owns the runtime"


@pytest.mark.parametrize("version", ["2.2.1", "2.3.0"])
def test_kubeflow_images_are_pinned_to_the_selected_trainer_version(version: str) -> None:
    raw = {**MINIMAL, "components": {"trainer": {"version": version}, "kueue": {"trainJobIntegration": False}}}
    kubeflow = [i for r in runtimes(raw).values() for i in images_of(r) if i.startswith("ghcr.io/kubeflow/")]
    assert len(kubeflow) == 1 + 1 + 1 + 3 * 3  # deepspeed, mlx, xgboost, 3 × torchtune (distinct per runtime)
    assert {i.rsplit(":", 1)[1] for i in kubeflow} == {f"v{version}"}


def test_config_mistakes_name_their_path() -> None:
    raw = {
        **MINIMAL,
        "teams": [{"name": "vision"}],
        "runtimes": {
            "enabled": ["torch-distributd", "torch-distributed-with-cache", "jax-distributed"],
            "overrides": {"mlx-distrbuted": {"numNodes": 2}},
            "retiring": ["xgboost-distributed"],
            "teams": [{"team": "visoin", "runtime": "jax-distributed"}],
        },
    }
    assert issues(raw) == [
        ("runtimes.overrides.mlx-distrbuted", "no such runtime in the catalog", "did you mean 'mlx-distributed'?"),
        ("runtimes.enabled[0]", "no such runtime in the catalog", "did you mean 'torch-distributed'?"),
        (
            "runtimes.enabled[1]",
            "cannot be served by this stack",
            "torch-distributed-with-cache needs data-cache (set dataCache.enabled: true)",
        ),
        (
            "runtimes.retiring[0]",
            "not an enabled runtime",
            "a retiring runtime stays enabled for one more `pulumi up`; remove it from both lists afterwards",
        ),
        ("runtimes.teams[0].team", "no such team in teams[]", "did you mean 'vision'?"),
    ]


def test_overrides_reach_the_sdk_with_the_right_device_count() -> None:
    override = {"numNodes": 2, "image": "registry.corp/tune:1.2", "resources": {"limits": {"nvidia.com/gpu": 4}}}
    raw = {**MINIMAL, "runtimes": {"overrides": {"torchtune-llama3.2-1b": override}}}
    served = runtimes(raw)
    tune = served["torchtune-llama3.2-1b"]
    assert tune["spec"]["mlPolicy"]["numNodes"] == 2
    node = next(c for c in containers(tune) if c["name"] == "node")
    assert node["image"] == "registry.corp/tune:1.2"
    assert node["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    with sdk_against(FakeCluster(list(served.values()))) as sdk:
        runtime = sdk.get_runtime("torchtune-llama3.2-1b")
    # Quoted quantities: 4 GPUs per node × 2 nodes. An unquoted 4 would be read as "4.0" and not multiplied.
    assert (runtime.trainer.device, runtime.trainer.device_count, runtime.trainer.num_nodes) == ("gpu", "8", 2)
    assert served["torchtune-llama3.2-3b"]["spec"]["mlPolicy"]["numNodes"] == 1, "only the named runtime changes"


def test_mirror_and_default_resources_are_injected_everywhere() -> None:
    raw = {
        **MINIMAL,
        "images": {"registryMirror": "mirror.corp:5000/k8s"},
        "runtimes": {"defaultResources": {"requests": {"cpu": "2", "memory": "8Gi"}}},
        **DATA_CACHE_ON,
    }
    served = runtimes(raw)
    images = [i for r in served.values() for i in images_of(r)]
    assert images and all(i.startswith("mirror.corp:5000/k8s/") for i in images), images
    assert "mirror.corp:5000/k8s/ghcr.io/kubeflow/trainer/data-cache:v2.2.1" in images  # CACHE_IMAGE env value
    for name, runtime in served.items():
        for c in containers(runtime):
            if name in TORCHTUNE and c["name"] == "node":
                assert c["resources"] == {"limits": {"nvidia.com/gpu": "2"}}, "the file's resources win"
            else:
                assert c["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}}


def test_team_runtime_lives_in_the_team_namespace() -> None:
    raw = {
        **MINIMAL,
        "teams": [{"name": "vision", "namespace": "team-vision"}],
        "runtimes": {
            "teams": [
                {"team": "vision", "runtime": "torch-distributed", "name": "torch-vision", "overrides": {"numNodes": 4}}
            ]
        },
    }
    team = runtimes(raw)["torch-vision"]
    assert (team["kind"], team["metadata"]["namespace"]) == ("TrainingRuntime", "team-vision")
    assert team["metadata"]["labels"]["trainer-platform.io/team"] == "vision"
    assert team["spec"]["mlPolicy"]["numNodes"] == 4


def test_runtimes_are_protected_and_retained_and_removal_takes_two_deliberate_steps() -> None:
    before = render(MINIMAL)
    mlx = resource(before, "clustertrainingruntime-mlx-distributed")
    assert (mlx["protect"], mlx["retainOnDelete"]) == (True, True), "pulumi refuses to delete it"
    assert "trainer-ready" in mlx["dependsOn"]

    # Step 1: mark it retiring: still served, labelled deprecated, protection dropped.
    retiring = render({**MINIMAL, "runtimes": {"retiring": ["mlx-distributed"]}})
    mlx = resource(retiring, "clustertrainingruntime-mlx-distributed")
    assert (mlx["protect"], mlx["retainOnDelete"]) == (False, True)
    manifest = next(m for m in retiring.manifests if m["metadata"]["name"] == "mlx-distributed")
    assert manifest["metadata"]["labels"]["trainer.kubeflow.org/support"] == "deprecated"
    assert resource(retiring, "clustertrainingruntime-torch-distributed")["protect"] is True

    # Step 2: drop it; Pulumi forgets it, the cluster keeps it for the TrainJobs still using it.
    enabled = [n for n in load_catalog(CATALOG).names() if n not in ("mlx-distributed", "torch-distributed-with-cache")]
    after = render({**MINIMAL, "runtimes": {"enabled": enabled}})
    assert [r["name"] for r in before.resources if r not in after.resources] == [
        "clustertrainingruntime-mlx-distributed"
    ]


def test_allow_data_loss_lets_a_destroy_delete_the_runtimes() -> None:
    """Retained runtimes would outlive the Trainer controller on a destroy, and the CRD's delete would then wait
    forever on their finalizer (seen with the real engine, tests/e2e/test_pulumi.py)."""
    rendered = render({**MINIMAL, "allowDataLoss": True})
    runtimes = [r for r in rendered.resources if r["name"].startswith("clustertrainingruntime-")]
    assert runtimes and all((r["protect"], r["retainOnDelete"]) == (False, False) for r in runtimes)


def test_a_new_version_rolls_to_dev_while_prod_pins_the_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "runtimes"
    shutil.copytree(CATALOG, folder)
    old = yaml.safe_load((CATALOG / "torch-distributed.yaml").read_text())
    new = yaml.safe_load((CATALOG / "torch-distributed.yaml").read_text())
    new["metadata"]["annotations"]["trainer-platform.io/runtime-version"] = "1.1.0"
    node = new["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["image"] = "pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime"
    (folder / "torch-distributed.yaml").write_text(yaml.safe_dump(new))
    (folder / "torch-distributed@1.0.0.yaml").write_text(yaml.safe_dump(old))
    monkeypatch.setenv("TRAINER_PLATFORM_RUNTIMES", str(folder))

    dev = runtimes({**MINIMAL, "runtimes": {"versionedNames": True}})
    prod = runtimes({**MINIMAL, "runtimes": {"versions": {"torch-distributed": "1.0.0"}}})
    version = "trainer-platform.io/runtime-version"
    assert dev["torch-distributed"]["metadata"]["labels"][version] == "1.1.0"
    assert prod["torch-distributed"]["metadata"]["labels"][version] == "1.0.0"
    assert "torch-distributed-v1.1.0" not in prod
    # A data scientist on dev pins `torch-distributed-v1.0.0` before the stable name moves on.
    assert dev["torch-distributed-v1.0.0"]["spec"] == prod["torch-distributed"]["spec"]
    assert dev["torch-distributed-v1.1.0"]["spec"] == dev["torch-distributed"]["spec"]
    assert issues({**MINIMAL, "runtimes": {"versions": {"torch-distributed": "2.0.0"}}}) == [
        ("runtimes.versions.torch-distributed", "no such version", "catalog has 1.1.0, 1.0.0")
    ]


def test_catalog_list_shows_what_a_stack_serves_and_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    from trainer_infra.cli import main

    assert main(["catalog", "list", "--stack", "prod"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert set(rows) == set(load_catalog(CATALOG).names())
    assert "enabled" in rows["torchtune-llama3.2-1b"]
    assert (
        "registry.internal.example.com:5000/mirror/ghcr.io/kubeflow/trainer/torchtune-trainer:v2.2.1"
        in (rows["torchtune-llama3.2-1b"])
    )
    assert "disabled: torch-distributed-with-cache needs data-cache" in rows["torch-distributed-with-cache"]


def test_editing_a_jobset_policy_in_place_is_refused_by_the_api_server() -> None:
    """Why README says: ship a change to successPolicy & co. as a new runtime name, not as an edit."""
    from tests.conformance import Conformance

    old = runtimes(MINIMAL)["deepspeed-distributed"]
    new = yaml.safe_load(yaml.safe_dump(old))
    new["spec"]["template"]["spec"]["successPolicy"]["targetReplicatedJobs"] = ["node"]
    checker = Conformance("1.34", crd_versions(validate(MINIMAL)))
    assert checker.check(new) == [], "valid as a new object"
    assert [f.message for f in checker.check(new, old=old)] == [
        "spec.template.spec.successPolicy: Value is immutable (CEL: self == oldSelf)"
    ]


@pytest.mark.parametrize(
    "stack", sorted(p.stem.removeprefix("Pulumi.") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
)
def test_every_stack_serves_runtimes_the_webhooks_accept(stack: str) -> None:
    """After all injections (placement, the team volume, …): the Trainer runtime rules and JobSet's rule
    that a claim template never shares a name with a pod volume (local mounts the team claim as `initializer`)."""
    raw = stack_raw(stack)
    for runtime in runtimes(raw).values():
        cache = "data-cache" in runtime["metadata"]["annotations"].get("trainer-platform.io/requires", "")
        assert runtime_findings(runtime, initializer_volume=not cache) == [], runtime["metadata"]["name"]


def test_a_claim_template_clashing_with_a_pod_volume_is_caught() -> None:
    runtime = copy.deepcopy(load_catalog(CATALOG).versions_of("torchtune-llama3.2-1b")[0].manifest("2.2.1"))
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "initializer", "persistentVolumeClaim": {"claimName": "workspace"}}]
    assert runtime_findings(runtime) == [
        (
            "spec.template.spec.volumeClaimPolicies[0].templates[0]",
            "claim template 'initializer' clashes with a volume of spec.template.spec.replicatedJobs[2]",
        )
    ]
    with_storage = runtimes(stack_raw("local"))["torchtune-llama3.2-1b"]["spec"]["template"]["spec"]
    assert "volumeClaimPolicies" not in with_storage, "the team claim replaces the per-TrainJob claim"
    assert "volumeClaimPolicies" in runtimes(MINIMAL)["torchtune-llama3.2-1b"]["spec"]["template"]["spec"]
