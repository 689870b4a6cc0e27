"""Fault-tolerance and lifecycle defaults on every served runtime, and the refusals that go with them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, ROOT, plan_of
from trainer_infra.catalog.fault_tolerance import GRACE_SECONDS
from trainer_infra.core.errors import ConfigError

CATALOG = ROOT / "runtimes"
EFS = {"efs": {"fileSystemId": "fs-1"}}


def served(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    plan = plan_of(raw)
    return {o.manifest["metadata"]["name"]: o.manifest for o in plan.objects if o.manifest["kind"].endswith("Runtime")}


def _jobs(runtime: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {j["name"]: j["template"]["spec"] for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]}


def test_defaults_restart_the_gang_three_times_and_fail_fast_on_unfixable_exits() -> None:
    tune = served(MINIMAL)["torchtune-llama3.2-1b"]
    policy = tune["spec"]["template"]["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 3 and policy["restartStrategy"] == "Recreate"
    assert policy["rules"] == [
        {"name": "nonRetriableExitCode", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}
    ]
    jobs = _jobs(tune)
    assert jobs["node"]["backoffLimit"] == 0, "one lost rank fails the Job: the JobSet restarts the gang"
    assert "backoffLimit" not in jobs["dataset-initializer"], "initializers retry in place (Job default)"
    for spec in jobs.values():
        assert spec["template"]["spec"]["restartPolicy"] == "Never"  # required by podFailurePolicy
        rules = spec["podFailurePolicy"]["rules"]
        assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]} in rules
        assert {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [2, 126, 127]}} in rules


def test_per_runtime_override_changes_only_the_keys_it_names() -> None:
    raw = {
        **MINIMAL,
        "runtimes": {
            "faultTolerance": {"maxRestarts": 5, "nonRetriableExitCodes": [42]},
            "overrides": {"torch-distributed": {"faultTolerance": {"maxRestarts": 0, "activeDeadlineSeconds": 3600}}},
        },
    }
    rts = served(raw)
    torch = rts["torch-distributed"]["spec"]["template"]["spec"]
    assert torch["failurePolicy"]["maxRestarts"] == 0
    assert [r["name"] for r in torch["failurePolicy"]["rules"]] == ["nonRetriableExitCode", "deadlineExceeded"]
    assert _jobs(rts["torch-distributed"])["node"]["activeDeadlineSeconds"] == 3600
    assert {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}} in _jobs(rts["torch-distributed"])[
        "node"
    ]["podFailurePolicy"]["rules"]
    assert rts["jax-distributed"]["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"] == 5


def test_every_pod_gets_the_grace_period_to_checkpoint_when_preempted_and_a_runtime_may_differ() -> None:
    """Kueue stops an evicted TrainJob by suspending it: its pods are deleted, SIGTERM, then this long before
    SIGKILL. The stack's default for every step Job's pods, a per-runtime override, a runtime file's own value."""
    rts = served(MINIMAL)
    for name, rt in rts.items():
        for job, spec in _jobs(rt).items():
            assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == GRACE_SECONDS, (name, job)
    raw = {
        **MINIMAL,
        "runtimes": {
            "faultTolerance": {"terminationGracePeriodSeconds": 600},
            "overrides": {"torch-distributed": {"faultTolerance": {"terminationGracePeriodSeconds": 30}}},
        },
    }
    rts = served(raw)
    assert _jobs(rts["torch-distributed"])["node"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30
    assert _jobs(rts["jax-distributed"])["node"]["template"]["spec"]["terminationGracePeriodSeconds"] == 600
    with pytest.raises(ConfigError, match="terminationGracePeriodSeconds"):
        plan_of({**MINIMAL, "runtimes": {"faultTolerance": {"terminationGracePeriodSeconds": -1}}})


def test_a_runtime_files_own_grace_period_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "terminationGracePeriodSeconds"
        ] = 900

    _catalog_with(tmp_path, monkeypatch, "jax-distributed", edit)
    assert _jobs(served(MINIMAL)["jax-distributed"])["node"]["template"]["spec"]["terminationGracePeriodSeconds"] == 900


def _catalog_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, edit: Any) -> None:
    folder = tmp_path / "runtimes"
    shutil.copytree(CATALOG, folder)
    doc = yaml.safe_load((folder / f"{name}.yaml").read_text())
    edit(doc)
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("TRAINER_PLATFORM_RUNTIMES", str(folder))


def test_a_runtime_file_with_a_ttl_is_refused_with_the_upstream_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _catalog_with(
        tmp_path,
        monkeypatch,
        "torch-distributed",
        lambda d: d["spec"]["template"]["spec"].update(ttlSecondsAfterFinished=60),
    )
    with pytest.raises(ConfigError) as info:
        plan_of(MINIMAL)
    (issue,) = [i for i in info.value.issues if "ttlSecondsAfterFinished" in i.path]
    assert issue.path.endswith("torch-distributed.yaml:spec.template.spec.ttlSecondsAfterFinished")
    assert "trainer#3779" in issue.message


def test_a_runtime_whose_trainer_mounts_the_claim_elsewhere_is_refused_at_render_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def extra_mount(doc: dict[str, Any]) -> None:
        node = doc["spec"]["template"]["spec"]["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
        node["containers"][0]["volumeMounts"].append({"name": "initializer", "mountPath": "/data"})

    _catalog_with(tmp_path, monkeypatch, "torchtune-llama3.2-1b", extra_mount)
    served(MINIMAL)  # without shared storage there is no job directory to disagree on
    with pytest.raises(ConfigError) as info:
        served({**MINIMAL, "storage": EFS})
    (issue,) = info.value.issues
    assert issue.path == "runtimes.torchtune-llama3.2-1b"
    assert "node/node: /data → <claim root>" in issue.message
    assert "dataset-initializer/dataset-initializer: /workspace → jobs/$(TRAIN_JOB_NAME)" in issue.message
