"""`trainer-infra migrate` against the real controllers: Training Operator v1 jobs, converted by the CLI for
the `local` stack, are submitted by a team member, admitted by Kueue and run on kwok nodes; the inventory
reads v1 objects created under the upstream v1 CRDs (read-only, with a list-only identity) and changes none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import platform as scenarios
from tests.e2e.installed import stack_file
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.render import RenderOutput
from trainer_infra.sandbox.versions import CHECKOUT, shared_dir

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
Platform = scenarios.Platform  # the session fixture `platform` (conftest.py): the local render, applied
V1_CRDS = ("training-operator-v1", "v1.9.4")
V1_KINDS = ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "JAXJob", "PaddleJob")
READER = "migrate-reader@example.com"
IMAGE = "docker.io/example/train:1.0"


def container(name: str, **extra: Any) -> Obj:
    return {
        "name": name,
        "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1", "cpu": "1"}},
        **extra,
    }


def replica(n: int, c: Obj, **pod: Any) -> Obj:
    return {"replicas": n, "template": {"spec": {"containers": [c], **pod}}}


def v1_jobs(ns: str, deepspeed_image: str) -> list[Obj]:
    """One job per kind the e2e covers, written as Training Operator v1 users write them."""
    torchrun = container(
        "pytorch", command=["torchrun", "train.py"], volumeMounts=[{"name": "ws", "mountPath": "/workspace"}]
    )
    ws = [{"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}}]
    launcher = {"name": "launcher", "image": deepspeed_image, "command": ["deepspeed", "/workspace/train.py"]}
    worker = container("worker", image=deepspeed_image)

    def meta(name: str) -> Obj:
        return {"name": name, "namespace": ns}

    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": meta("mig-torch"),
            "spec": {
                "runPolicy": {"schedulingPolicy": {"priorityClass": "normal"}},
                "pytorchReplicaSpecs": {
                    "Master": replica(1, torchrun, volumes=ws),
                    "Worker": replica(1, torchrun, volumes=ws),
                },
            },
        },
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": meta("mig-deepspeed"),
            "spec": {
                "slotsPerWorker": 1,
                "mpiReplicaSpecs": {"Launcher": replica(1, launcher), "Worker": replica(2, worker)},
            },
        },
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "XGBoostJob",
            "metadata": meta("mig-xgboost"),
            "spec": {
                "xgbReplicaSpecs": {
                    "Master": replica(1, container("xgboost")),
                    "Worker": replica(1, container("xgboost")),
                }
            },
        },
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "JAXJob",
            "metadata": meta("mig-jax"),
            "spec": {"jaxReplicaSpecs": {"Worker": replica(2, container("jax"))}},
        },
    ]


def migrate(render: RenderOutput, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``trainer-infra migrate`` with the stack the session deployed (`local` with its e2e keys: the image mirror)."""
    env = {**os.environ, **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})}
    cmd = [sys.executable, "-m", "trainer_infra", "migrate", "--config-file", str(stack_file(render)), *args]
    return subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=300, env=env)


def node_image(platform: Platform, runtime: str) -> str:
    rt = next(r for r in platform.runtimes() if r["metadata"]["name"] == runtime)
    node = next(j for j in rt["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    return str(node["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


def pods_running(admin: KubeClient, ns: str, name: str, count: int) -> None:
    def running() -> bool:
        pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        return len([p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]) == count

    try:
        wait_for(f"{count} Running pods of {ns}/{name}", running, 120)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{scenarios.describe_namespace(admin, ns)}") from None


def submit_and_run(sandbox: Sandbox, team: scenarios.Team, trainjobs: list[Obj], pods: dict[str, int]) -> None:
    """Create the TrainJobs as the team member; each is admitted and its pods run on the team's pool."""
    member = sandbox.user_client(team.user, team.groups)
    for tj in trainjobs:
        member.create(tj)
    admin = sandbox.client
    for tj in trainjobs:
        name = tj["metadata"]["name"]
        wl = scenarios.wait_admitted(admin, team.namespace, name, 120, " (migrated)")
        cq = admin.get("kueue.x-k8s.io/v1beta2", "LocalQueue", team.queue, team.namespace)["spec"]["clusterQueue"]
        assert wl["status"]["admission"]["clusterQueue"] == cq
        pods_running(admin, team.namespace, name, pods[name])


@pytest.fixture
def team(sandbox: Sandbox, platform: Platform) -> Iterator[scenarios.Team]:
    chosen = platform.teams()[0]
    yield chosen
    scenarios.delete_trainjobs(sandbox.client, [chosen.namespace])


def test_migrated_jobs_are_admitted_and_run_as_a_team_member(
    sandbox: Sandbox, platform: Platform, team: scenarios.Team, tmp_path: Path, local_render: RenderOutput
) -> None:
    jobs = v1_jobs(team.namespace, node_image(platform, "deepspeed-distributed"))
    src = tmp_path / "v1.yaml"
    src.write_text(yaml.safe_dump_all(jobs))
    out = tmp_path / "out"
    proc = migrate(local_render, str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    trainjobs = [yaml.safe_load(p.read_text()) for p in sorted(out.rglob("*.yaml"))]
    runtimes = {t["metadata"]["name"]: t["spec"]["runtimeRef"]["name"] for t in trainjobs}
    assert runtimes == {
        "mig-torch": "torch-distributed",
        "mig-deepspeed": "deepspeed-distributed",
        "mig-xgboost": "xgboost-distributed",
        "mig-jax": "jax-distributed",
    }
    # torch/xgboost/jax: one pod per node; deepspeed: the launcher is node 0 plus numNodes-1 node pods
    submit_and_run(sandbox, team, trainjobs, {"mig-torch": 2, "mig-deepspeed": 2, "mig-xgboost": 2, "mig-jax": 2})


@pytest.fixture
def v1_crds(sandbox: Sandbox) -> Iterator[list[str]]:
    """The upstream Training Operator v1.9.4 CRDs (no operator runs: the objects only sit there)."""
    admin = sandbox.client
    names = []
    for path in sorted((shared_dir() / "crds" / V1_CRDS[0] / V1_CRDS[1]).glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        admin.apply(crd)
        names.append(crd["metadata"]["name"])

    def established() -> bool:
        return all(
            any(
                c["type"] == "Established" and c["status"] == "True"
                for c in admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", n)
                .get("status", {})
                .get("conditions", [])
            )
            for n in names
        )

    wait_for(f"v1 CRDs {names} Established", established, 60)
    yield names
    for n in names:
        admin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", n)


def create_when_served(admin: KubeClient, obj: Obj) -> Obj:
    """Discovery can lag a fresh CRD's Established condition by a moment."""

    def attempt() -> Obj | None:
        try:
            return admin.create(obj)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    created: Obj = wait_for(f"create {obj['kind']} {obj['metadata']['name']}", attempt, 30)
    return created


def reader_kubeconfig(sandbox: Sandbox) -> Path:
    """An identity that may only get/list the v1 kinds: the inventory cannot change anything with it."""
    admin = sandbox.client
    plurals = [k.lower() + "s" for k in V1_KINDS]
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "migrate-reader"},
            "rules": [{"apiGroups": ["kubeflow.org"], "resources": plurals, "verbs": ["get", "list"]}],
        }
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "migrate-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "migrate-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}],
        }
    )
    return sandbox.user_kubeconfig(READER)


def test_inventory_reads_v1_objects_and_changes_none(
    sandbox: Sandbox,
    platform: Platform,
    team: scenarios.Team,
    v1_crds: list[str],
    tmp_path: Path,
    local_render: RenderOutput,
) -> None:
    admin, ns = sandbox.client, team.namespace
    jobs = [j for j in v1_jobs(ns, node_image(platform, "deepspeed-distributed")) if j["kind"] != "MPIJob"]
    mpi_v1 = v1_jobs(ns, node_image(platform, "deepspeed-distributed"))[1]
    mpi_v1["apiVersion"] = "kubeflow.org/v1"  # the Training Operator serves MPIJob at v1 only
    lossy = yaml.safe_load(yaml.safe_dump(jobs[0]))
    lossy["metadata"]["name"] = "mig-lossy"
    lossy["spec"]["runPolicy"]["backoffLimit"] = 2
    refused = yaml.safe_load(yaml.safe_dump(jobs[0]))
    refused["metadata"]["name"] = "mig-hostpath"
    for spec in refused["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["volumes"] = [{"name": "ws", "hostPath": {"path": "/data"}}]
    tf = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mig-tf", "namespace": ns},
        "spec": {"tfReplicaSpecs": {"Worker": replica(1, container("tensorflow"))}},
    }
    created = [create_when_served(admin, o) for o in [*jobs, mpi_v1, lossy, refused, tf]]
    before = {(o["kind"], o["metadata"]["name"]): o["metadata"]["resourceVersion"] for o in created}

    out = tmp_path / "out"
    proc = migrate(
        local_render, "--from-cluster", "--namespace", ns, "--out", str(out), kubeconfig=reader_kubeconfig(sandbox)
    )
    assert proc.returncode == 1, proc.stderr  # not every job converts
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in proc.stdout.splitlines() if line[:1] not in " N"}
    # clean, lossy allowed, needs --allow-lossy, refused, cannot
    assert rows[(ns, "kubeflow.org/v1", "PyTorchJob")] == ["1", "0", "1", "1", "0"], proc.stdout
    assert rows[(ns, "kubeflow.org/v1", "MPIJob")] == ["1", "0", "0", "0", "0"], proc.stdout
    assert rows[(ns, "kubeflow.org/v1", "TFJob")] == ["0", "0", "0", "0", "1"], proc.stdout
    assert 'violates PodSecurity "baseline:' in proc.stdout and "hostPath volumes" in proc.stdout
    written = sorted(p.stem for p in out.rglob("*.yaml"))
    assert written == ["mig-deepspeed", "mig-jax", "mig-torch", "mig-xgboost"]

    for (kind, name), version in before.items():
        now = admin.get("kubeflow.org/v1", kind, name, ns)
        assert now["metadata"]["resourceVersion"] == version, f"{kind} {name} changed"

    trainjobs = [yaml.safe_load(p.read_text()) for p in sorted(out.rglob("*.yaml"))]
    submit_and_run(sandbox, team, trainjobs, {"mig-torch": 2, "mig-deepspeed": 2, "mig-xgboost": 2, "mig-jax": 2})
    for o in created:
        admin.delete(o["apiVersion"], o["kind"], o["metadata"]["name"], ns)
