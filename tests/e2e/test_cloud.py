"""Opt-in, against a real cloud: `pulumi preview` of the example stack of `E2E_CLOUD` (gke, aks, eks), and with
`E2E_CLOUD_UP=1` a real `up`, a one-node GPU TrainJob through a team's queue, and `destroy`.

Needs what only the platform team has: a cluster stack exporting the outputs the example stack reads, credentials
in the environment (gcloud ADC, az login / ARM_*, AWS_PROFILE), a Pulumi backend (`pulumi login`), the `pulumi` CLI,
and for the up a kubeconfig context for the cluster. Edit the example stack's project/subscription and cluster
stack names first, or point E2E_CLOUD_STACK_FILE at your own copy. Run:

    E2E_CLOUD=gke .venv/bin/python -m pytest -m cloud tests/e2e/test_cloud.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

CLOUD = os.environ.get("E2E_CLOUD", "")
UP = os.environ.get("E2E_CLOUD_UP") == "1"
NODE_POOL_TYPES = {
    "gke": "gcp:container/nodePool:NodePool",
    "aks": "azure-native:containerservice:AgentPool",
    "eks": "aws:eks/nodeGroup:NodeGroup",
}
pytestmark = [
    pytest.mark.cloud,
    pytest.mark.skipif(CLOUD not in NODE_POOL_TYPES, reason="opt-in: E2E_CLOUD=gke|aks|eks with credentials"),
]


def _pulumi(args: list[str], stack_file: Path, stack: str, timeout: int = 3600) -> str:
    pulumi = shutil.which("pulumi")
    assert pulumi, "the pulumi CLI is on PATH"
    command = [pulumi, *args, "--stack", stack, "--config-file", str(stack_file), "--non-interactive"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


@pytest.fixture(scope="module")
def stack_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example stack (or E2E_CLOUD_STACK_FILE); for an up, with allowDataLoss so the destroy can remove it."""
    source = Path(os.environ.get("E2E_CLOUD_STACK_FILE", ROOT / "stacks" / f"Pulumi.{CLOUD}.yaml"))
    document = yaml.safe_load(source.read_text())
    if UP:
        document["config"]["trainer-platform:allowDataLoss"] = True
    path = tmp_path_factory.mktemp("cloud") / source.name
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module")
def stack_name() -> str:
    name = os.environ.get("E2E_CLOUD_STACK", f"e2e-{CLOUD}")
    subprocess.run([shutil.which("pulumi") or "pulumi", "stack", "init", name], cwd=ROOT, capture_output=True)
    return name


def test_preview_plans_every_node_pool_and_never_replaces_one(stack_file: Path, stack_name: str) -> None:
    out = _pulumi(["preview", "--json"], stack_file, stack_name)
    steps: list[dict[str, Any]] = json.loads(out).get("steps", [])
    pools = [s for s in steps if s.get("newState", s.get("oldState", {})).get("type") == NODE_POOL_TYPES[CLOUD]]
    names = {p["newState"]["inputs"].get("name") or p["urn"].rsplit("::", 1)[-1] for p in pools if "newState" in p}
    document = yaml.safe_load(stack_file.read_text())
    declared = [p for p in document["config"]["trainer-platform:nodePools"] if p["backend"] == CLOUD]
    assert len(names) == len(declared), names
    assert all(p["op"] in ("create", "same", "update") for p in pools), [(p["urn"], p["op"]) for p in pools]


@pytest.mark.skipif(not UP, reason="E2E_CLOUD_UP=1 brings the stack up, runs a GPU job and destroys it")
def test_up_runs_a_one_node_gpu_job_and_destroys(stack_file: Path, stack_name: str) -> None:
    document = yaml.safe_load(stack_file.read_text())
    config = document["config"]
    context = config["trainer-platform:kubernetes"]["context"]
    team = config["trainer-platform:teams"][0]
    pool = next(p for p in config["trainer-platform:nodePools"] if p["name"] in team["quota"])
    try:
        _pulumi(["up", "--yes", "--skip-preview"], stack_file, stack_name, timeout=7200)
        job = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {
                "name": "e2e-cloud",
                "namespace": team["name"],
                "labels": {"kueue.x-k8s.io/queue-name": "default"},
            },
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {
                    "numNodes": 1,
                    "command": ["nvidia-smi"],
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}},
                },
            },
        }
        kubectl = [shutil.which("kubectl") or "kubectl", "--context", context]
        subprocess.run([*kubectl, "apply", "-f", "-"], input=json.dumps(job), text=True, check=True)
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline:
            status = subprocess.run(
                [*kubectl, "get", "trainjob", "e2e-cloud", "-n", team["name"], "-o", "json"],
                capture_output=True,
                text=True,
                check=True,
            )
            conditions = {
                c["type"]: c["status"] for c in json.loads(status.stdout).get("status", {}).get("conditions", [])
            }
            if conditions.get("Complete") == "True":
                break
            assert conditions.get("Failed") != "True", conditions
            time.sleep(30)
        else:
            pytest.fail("the GPU TrainJob did not complete within an hour")
        nodes = subprocess.run(
            [*kubectl, "get", "nodes", "-l", f"trainer-platform.io/node-pool={pool['name']}", "-o", "json"],
            capture_output=True,
            text=True,
            check=True,
        )
        items = json.loads(nodes.stdout)["items"]
        assert items and all(n["status"]["allocatable"].get("nvidia.com/gpu") for n in items)
    finally:
        _pulumi(["destroy", "--yes", "--skip-preview"], stack_file, stack_name, timeout=7200)
