"""`storage.mountPath` is one fact: every runtime the stack serves sees its job's directory of the claim there,
and nowhere else; values that would hide the image or meet the platform's own mounts are refused."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT, render, stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.render.enforce import check_rendered
from trainer_infra.stack.validate import validate

TORCHTUNE = ("torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b")


def _at(mount_path: str, **runtimes: Any) -> dict[str, Any]:
    raw = stack_raw("local")
    raw["storage"]["mountPath"] = mount_path
    if runtimes:
        raw["runtimes"] = runtimes
    return raw


def _claim_views(rendered: Any) -> dict[str, set[str]]:
    """Per served runtime: where its containers mount the claim volume (and CHECKPOINT_DIR under it)."""
    out: dict[str, set[str]] = {}
    for m in rendered.manifests:
        if not m["kind"].endswith("TrainingRuntime"):
            continue
        for job in m["spec"]["template"]["spec"]["replicatedJobs"]:
            for c in job["template"]["spec"]["template"]["spec"]["containers"]:
                mounts = {v["mountPath"] for v in c.get("volumeMounts") or [] if v["name"] == "initializer"}
                out.setdefault(m["metadata"]["name"], set()).update(mounts)
                checkpoints = [e["value"] for e in c.get("env") or [] if e["name"] == "CHECKPOINT_DIR"]
                assert checkpoints in ([], [f"{next(iter(mounts))}/checkpoints"])
    return {name: mounts for name, mounts in out.items() if mounts}


def test_a_non_default_mount_path_renders_and_validates_clean() -> None:
    raw = _at("/data/")
    validated = validate(raw)
    assert validated.config.storage is not None and validated.config.storage.mount_path == "/data"
    assert validated.warnings == []
    rendered = render(raw)
    views = _claim_views(rendered)
    assert views and set().union(*views.values()) == {"/data"}
    assert "torch-distributed" in views
    assert check_rendered(rendered) == []
    # The torchtune runtimes run the upstream initializer images, which write to /workspace whatever the mount.
    for name in TORCHTUNE:
        assert name not in views
        assert "storage.mountPath /workspace, not /data" in validated.selection.skipped[name]
    with pytest.raises(ConfigError) as refused:
        validate(_at("/data", enabled=["torch-distributed", TORCHTUNE[0]]))
    (issue,) = refused.value.issues
    assert issue.path == "runtimes.enabled[1]" and issue.found == TORCHTUNE[0]
    assert issue.hint and "/workspace/dataset" in issue.hint


def test_a_catalog_runtime_naming_workspace_follows_the_mount_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog file writes the claim as /workspace: its mount of the claim volume and the paths under it in
    command, args and env move to storage.mountPath."""
    folder = tmp_path / "runtimes"
    shutil.copytree(ROOT / "runtimes", folder)
    runtime = yaml.safe_load((folder / "torch-distributed.yaml").read_text())
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    node["containers"][0].update(
        command=["torchrun", "/workspace/train.py"],
        args=["--data=/workspace/data", "--cache=/workspaces/x"],
        env=[{"name": "OUT", "value": "/workspace/out"}],
        volumeMounts=[{"name": "initializer", "mountPath": "/workspace"}],
    )
    (folder / "torch-distributed.yaml").write_text(yaml.safe_dump(runtime))
    monkeypatch.setenv("TRAINER_PLATFORM_RUNTIMES", str(folder))
    rendered = render(_at("/data", enabled=["torch-distributed"]))
    served = next(m for m in rendered.manifests if m["metadata"]["name"] == "torch-distributed")
    (job,) = served["spec"]["template"]["spec"]["replicatedJobs"]
    (c,) = job["template"]["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["torchrun", "/data/train.py"]
    assert c["args"] == ["--data=/data/data", "--cache=/workspaces/x"]
    assert {"name": "OUT", "value": "/data/out"} in c["env"]
    assert [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "initializer"] == ["/data"]


@pytest.mark.parametrize(
    ("mount_path", "why"),
    [
        ("/", "whole filesystem"),
        ("data", "absolute path"),
        ("/data/../etc", "'..'"),
        ("/my data", "white space"),
        ("/etc", "/etc"),
        ("/usr/local/data", "/usr"),
        ("/var", "/var"),
        ("/proc", "/proc"),
        ("/dev/shm", "/dev"),
        ("/var/run", "/var"),
        ("/home", "HOME"),
        ("/home/trainer", "HOME"),
    ],
)
def test_unsafe_mount_paths_are_refused(mount_path: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        validate(_at(mount_path))
    (issue,) = refused.value.issues
    assert issue.path == "storage.mountPath" and why in issue.message
    assert issue.found is not None and mount_path in issue.found
