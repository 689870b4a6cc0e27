"""A platform engineer drops a file into runtimes/: a wrong one is refused with the file and the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT
from trainer_infra.catalog.loader import load_catalog
from trainer_infra.core.errors import ConfigError

CATALOG = ROOT / "runtimes"


def _catalog_with(tmp_path: Path, name: str, doc: dict[str, Any] | str) -> Path:
    folder = tmp_path / "runtimes"
    shutil.copytree(CATALOG, folder)
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    (folder / name).write_text(text)
    return folder


def _torch() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CATALOG / "torch-distributed.yaml").read_text())
    doc["metadata"]["name"] = "my-torch"
    return doc


def _issues(folder: Path) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        load_catalog(folder)
    return [(i.path, i.message) for i in info.value.issues]


def _node(doc: dict[str, Any], job: int = 0) -> dict[str, Any]:
    node: dict[str, Any] = doc["spec"]["template"]["spec"]["replicatedJobs"][job]["template"]["spec"]["template"]
    spec: dict[str, Any] = node["spec"]
    return spec


def test_shipped_catalog_loads() -> None:
    catalog = load_catalog(CATALOG)
    assert catalog.names() == sorted(p.stem for p in CATALOG.glob("[!_]*.yaml"))
    assert {e.framework for e in catalog.entries} == {"torch", "deepspeed", "mlx", "jax", "xgboost", "torchtune"}


def test_invalid_file_gives_the_exact_error(tmp_path: Path) -> None:
    doc = _torch()
    doc["spec"]["mlPolicy"]["numNode"] = 2
    folder = _catalog_with(tmp_path, "my-torch.yaml", doc)
    with pytest.raises(ConfigError) as info:
        load_catalog(folder)
    assert info.value.render() == (
        f"1 error(s) in {folder}:\n"
        "  runtimes/my-torch.yaml:spec.mlPolicy.numNode: unknown field 'numNode'\n"
        "      hint: did you mean 'numNodes'?"
    )


def _two_policies(doc: dict[str, Any]) -> None:
    doc["spec"]["mlPolicy"]["mpi"] = {"numProcPerNode": 1}


def _no_framework(doc: dict[str, Any]) -> None:
    del doc["metadata"]["labels"]["trainer.kubeflow.org/framework"]


def _untagged(doc: dict[str, Any]) -> None:
    _node(doc)["containers"][0]["image"] = "pytorch/pytorch"


def _latest(doc: dict[str, Any]) -> None:
    _node(doc)["containers"][0]["image"] = "ghcr.io/org/img:latest"


def _bad_digest(doc: dict[str, Any]) -> None:
    _node(doc)["containers"][0]["image"] = "ghcr.io/org/img:1.0@sha256:abc"


def _replicas(doc: dict[str, Any]) -> None:
    doc["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 2


def _no_node_container(doc: dict[str, Any]) -> None:
    _node(doc)["containers"][0]["name"] = "trainer"


def _pod_typo(doc: dict[str, Any]) -> None:
    doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["templates"] = {}


def _version_missing(doc: dict[str, Any]) -> None:
    del doc["metadata"]["annotations"]["trainer-platform.io/runtime-version"]


def _too_new(doc: dict[str, Any]) -> None:
    doc["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["x"]}]}}


JOB0 = "spec.template.spec.replicatedJobs[0]"
POD0 = f"{JOB0}.template.spec.template.spec"


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (
            _two_policies,
            "spec.mlPolicy",
            "at most one ML policy source (torch, mpi, jax, xgboost, flux); found ['torch', 'mpi']",
        ),
        (_no_framework, "metadata.labels", "missing label trainer.kubeflow.org/framework"),
        (
            _untagged,
            f"{POD0}.containers[0].image",
            "image has no tag: pin an explicit tag (and optionally @sha256:<digest>)",
        ),
        (_bad_digest, f"{POD0}.containers[0].image", "digest must be sha256:<64 hex digits>"),
        (_latest, f"{POD0}.containers[0].image", "image tag 'latest' is not a pin: use an explicit version tag"),
        (
            _replicas,
            f"{JOB0}.replicas",
            "a job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer must have replicas 1",
        ),
        (_no_node_container, f"{POD0}.containers", "the trainer job needs a container named 'node'"),
        (_pod_typo, f"{JOB0}.template.spec.templates", "unknown field 'templates'"),
        (_too_new, "spec.mlPolicy.torch.envInjection", "needs Trainer >= 2.3.0, file targets 2.2.1, 2.2.0"),
        (
            _version_missing,
            "metadata.annotations.trainer-platform.io/runtime-version",
            "required annotation is missing",
        ),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] if callable(v) else "",
)
def test_each_mistake_is_reported_at_its_path(tmp_path: Path, change: Any, path: str, message: str) -> None:
    doc = _torch()
    change(doc)
    assert _issues(_catalog_with(tmp_path, "my-torch.yaml", doc)) == [(f"runtimes/my-torch.yaml:{path}", message)]


def test_initializer_job_needs_its_container_and_the_initializer_mount(tmp_path: Path) -> None:
    doc = yaml.safe_load((CATALOG / "torchtune-llama3.2-1b.yaml").read_text())
    doc["metadata"]["name"] = "tune"
    _node(doc, 0)["containers"][0]["volumeMounts"] = []
    _node(doc, 1)["containers"][0]["name"] = "downloader"
    pod = "spec.template.spec.replicatedJobs[{}].template.spec.template.spec.containers"
    assert _issues(_catalog_with(tmp_path, "tune.yaml", doc)) == [
        (
            f"runtimes/tune.yaml:{pod.format(0)}[0].volumeMounts",
            "the dataset-initializer container must mount the 'initializer' volume (the trainer reads it)",
        ),
        (
            f"runtimes/tune.yaml:{pod.format(1)}",
            "the model-initializer job needs a container named 'model-initializer'",
        ),
    ]


def test_a_digest_pins_an_image_beside_its_tag(tmp_path: Path) -> None:
    doc = _torch()
    image = "ghcr.io/org/img:1.0@sha256:" + "a" * 64
    _node(doc)["containers"][0]["image"] = image
    entry = load_catalog(_catalog_with(tmp_path, "my-torch.yaml", doc)).versions_of("my-torch")[0]
    assert entry.images("2.2.1") == [image]


def test_duplicate_runtime_names_both_files(tmp_path: Path) -> None:
    doc = yaml.safe_load((CATALOG / "torch-distributed.yaml").read_text())
    folder = _catalog_with(tmp_path, "torch-distributed@1.0.0.yaml", doc)
    assert _issues(folder) == [
        ("runtimes/torch-distributed@1.0.0.yaml:metadata.name", "duplicate runtime torch-distributed 1.0.0")
    ]


def test_an_older_version_can_live_beside_the_current_one(tmp_path: Path) -> None:
    doc = yaml.safe_load((CATALOG / "torch-distributed.yaml").read_text())
    doc["metadata"]["annotations"]["trainer-platform.io/runtime-version"] = "0.9.0"
    catalog = load_catalog(_catalog_with(tmp_path, "torch-distributed@0.9.0.yaml", doc))
    assert [e.version for e in catalog.versions_of("torch-distributed")] == ["1.0.0", "0.9.0"]


def test_validate_refuses_a_broken_catalog_without_a_traceback(tmp_path: Path) -> None:
    doc = _torch()
    _untagged(doc)
    folder = _catalog_with(tmp_path, "my-torch.yaml", doc)
    done = subprocess.run(
        [sys.executable, "-m", "trainer_infra", "validate", "--stack", "local"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "TRAINER_PLATFORM_RUNTIMES": str(folder)},
    )
    assert done.returncode == 2
    assert "runtimes/my-torch.yaml:spec.template.spec.replicatedJobs[0]" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"hostPID": True}, "hostPID: true shares the node's namespace with the pod"),
        ({"hostNetwork": True}, "hostNetwork: true shares the node's namespace with the pod"),
        (
            {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
            "volume 'root' is of kind hostPath: only claims and emptyDir, configMap, secret, projected, "
            "downwardAPI volumes are allowed (other kinds reach storage or the node outside the team's space)",
        ),
        (
            {"priorityClassName": "system-node-critical"},
            "priorityClassName 'system-node-critical' is not one of the platform's priority classes []",
        ),
    ],
)
def test_runtime_files_that_reach_the_node_are_refused(tmp_path: Path, pod: dict[str, Any], message: str) -> None:
    """A runtime file that reaches the node would hand it to every team's jobs: `validate`/`render` refuse it
    (the policy rule refuses it too)."""
    doc = _torch()
    _node(doc).update(pod)
    assert _issues(_catalog_with(tmp_path, "my-torch.yaml", doc)) == [(f"runtimes/my-torch.yaml:{POD0}", message)]


def test_privileged_and_added_capabilities_are_refused(tmp_path: Path) -> None:
    doc = _torch()
    _node(doc)["containers"][0]["securityContext"] = {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}
    assert _issues(_catalog_with(tmp_path, "my-torch.yaml", doc)) == [
        (f"runtimes/my-torch.yaml:{POD0}", "containers[node]: privileged containers control the node"),
        (
            f"runtimes/my-torch.yaml:{POD0}",
            "containers[node]: adds capabilities ['SYS_ADMIN'] (only NET_BIND_SERVICE may be)",
        ),
    ]
