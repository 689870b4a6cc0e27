"""Shared storage: every backend gives RWX team claims; runtimes mount them at /workspace."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.conformance import Conformance
from tests.helpers import MINIMAL, conformance_findings, crd_versions, render, resource
from trainer_infra.catalog.injections import apply_injections
from trainer_infra.core.errors import ConfigError
from trainer_infra.datacache.rbac import CACHE_ROLE
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate
from trainer_infra.storage.injection import workspace_disagreement

TEAMS: list[dict[str, Any]] = [{"name": "nlp", "storage": {"size": "2Ti"}}, {"name": "vision", "namespace": "cv"}]
# Without a root `storage`, a team's `storage` has no effect and is refused: these stacks leave it out.
TEAMS_NO_STORAGE = [{k: v for k, v in t.items() if k != "storage"} for t in TEAMS]
BACKENDS: dict[str, tuple[dict[str, Any], str]] = {
    "nfs": ({"nfs": {"server": "10.0.0.2", "share": "/exports"}}, "nfs.csi.k8s.io"),
    "efs": ({"efs": {"fileSystemId": "fs-0123456789abcdef0"}}, "efs.csi.aws.com"),
    "filestore": ({"filestore": {"tier": "standard"}}, "filestore.csi.storage.gke.io"),
    "azurefile": ({"azurefile": {"skuName": "Premium_LRS"}}, "file.csi.azure.com"),
    "lustre-fsx": (
        {"lustre": {"provider": "fsx", "subnetId": "subnet-1", "perUnitStorageThroughput": 250}},
        "fsx.csi.aws.com",
    ),
    "lustre-gke": ({"lustre": {"provider": "gke", "perUnitStorageThroughput": 500}}, "lustre.csi.storage.gke.io"),
}


def _objects(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o.key: o.manifest for o in build_plan(validate(raw)).objects}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_each_backend_gives_every_team_a_rwx_claim_on_a_retain_class(backend: str) -> None:
    storage, provisioner = BACKENDS[backend]
    teams = copy.deepcopy(TEAMS)
    teams[1]["storage"] = {"size": "1200Gi"}  # the smallest FSx file system
    raw = {**MINIMAL, "storage": storage, "teams": teams}
    objects = _objects(raw)
    sc = objects["storageclass-trainer-platform-shared"]
    assert (sc["provisioner"], sc["reclaimPolicy"]) == (provisioner, "Retain")
    for ns, size in (("nlp", "2Ti"), ("cv", "1200Gi")):
        claim = objects[f"persistentvolumeclaim-{ns}-workspace"]["spec"]
        assert claim == {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "trainer-platform-shared",
            "resources": {"requests": {"storage": size}},
        }
    checker = Conformance("1.34", crd_versions(validate(raw)))
    assert checker.check_all(list(objects.values())) == []


def test_existing_class_is_used_not_created() -> None:
    objects = _objects({**MINIMAL, "storage": {"existing": {"className": "gp-rwx"}}, "teams": TEAMS})
    assert not any(k.startswith("storageclass-") for k in objects)
    assert objects["persistentvolumeclaim-nlp-workspace"]["spec"]["storageClassName"] == "gp-rwx"


@pytest.mark.parametrize(
    ("storage", "teams", "path", "hint"),
    [
        ({"filestore": {}}, [{"name": "a", "storage": {"size": "100Gi"}}], "teams[0].storage.size", "1024Gi"),
        ({"nfs": {}}, [], "storage.nfs.server", "inClusterServer"),
        ({"nfs": {"server": "x"}, "efs": {"fileSystemId": "fs-1"}}, [], "storage", None),
        ({"lustre": {"provider": "fsx"}}, [], "storage.lustre.subnetId", "subnet"),
        ({"lustre": {"provider": "fsx", "subnetId": "s"}}, [], "storage.lustre.perUnitStorageThroughput", "125"),
        ({"azurefile": {"skuName": "Standard_LRS"}}, [], "storage.azurefile.protocol", "Premium"),
    ],
    ids=[
        "below-backend-minimum",
        "nfs-without-server",
        "two-backends",
        "fsx-without-subnet",
        "fsx-persistent-without-throughput",
        "azure-nfs-on-standard",
    ],
)
def test_storage_mistakes_are_reported_at_their_path(
    storage: dict[str, Any], teams: list[dict[str, Any]], path: str, hint: str | None
) -> None:
    with pytest.raises(ConfigError) as err:
        validate({**MINIMAL, "storage": storage, "teams": teams})
    issue = next(i for i in err.value.issues if i.path == path)
    assert hint is None or hint in (issue.hint or "") + issue.message


def test_local_stack_runs_its_own_nfs_server_and_claims_wait_for_it() -> None:
    raw = {**MINIMAL, "storage": {"nfs": {"inClusterServer": {"enabled": True}}}, "teams": TEAMS}
    rendered = render(raw)
    assert conformance_findings(raw, rendered) == []
    sc = next(m for m in rendered.manifests if m["kind"] == "StorageClass")
    assert sc["parameters"]["server"] == "nfs-server.trainer-platform-storage.svc.cluster.local"
    driver = next(r for r in rendered.releases if r["name"] == "csi-driver-nfs")
    assert (driver["chart"], driver["version"]) == ("csi-driver-nfs", "4.13.4")
    assert driver["repository"] == "https://raw.githubusercontent.com/kubernetes-csi/csi-driver-nfs/master/charts"
    claim = resource(rendered, "persistentvolumeclaim-nlp-workspace")
    assert {"csi-driver-nfs", "storageclass-trainer-platform-shared", "namespace-nlp"} <= set(claim["dependsOn"])
    assert "deployment-trainer-platform-storage-nfs-server" in claim["dependsOn"]


def test_nfs_driver_values_are_merged_last_so_the_node_plugin_can_be_kept_off_nodes() -> None:
    """The chart's node plugin tolerates every taint: an admin keeps it off nodes that never mount NFS (a system
    pool; the e2e's real node, whose kernel has no NFS client) with `storage.nfs.driver.values`."""
    affinity: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    driver_cfg = {"values": {"node": {"affinity": affinity}, "storageClass": {"create": True}}}
    storage = {"nfs": {"inClusterServer": {"enabled": True}, "driver": driver_cfg}}
    raw = {**MINIMAL, "images": {"registryMirror": "mirror.example.com/k8s"}, "storage": storage, "teams": TEAMS}
    driver = next(r for r in render(raw).releases if r["name"] == "csi-driver-nfs")
    assert driver["values"]["node"] == {"affinity": affinity}
    assert driver["values"]["image"]["baseRepo"] == "mirror.example.com/k8s/registry.k8s.io"  # ours, kept
    assert driver["values"]["storageClass"] == {"create": True}  # what the user sets wins, as for controllers
    with pytest.raises(ConfigError) as err:
        validate({**MINIMAL, "storage": {"nfs": {"server": "x", "driver": {"valuse": {}}}}})
    assert any(i.path == "storage.nfs.driver.valuse" for i in err.value.issues)


def _job(name: str, step: str | None, container: str, mounts: list[dict[str, str]]) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": container, "image": "img", "volumeMounts": mounts}]}
    if mounts:
        pod["volumes"] = [{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}]
    job: dict[str, Any] = {"name": name, "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}
    if step:
        job["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}}
    return job


def _runtime(jobs: list[dict[str, Any]], policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "rt", "labels": {"trainer.kubeflow.org/framework": "torchtune"}},
        "spec": {"mlPolicy": {"numNodes": 1, **policy}, "template": {"spec": {"replicatedJobs": jobs}}},
    }


# Shaped like upstream torchtune runtimes: the initializers and the node mount `initializer` under /workspace.
TORCHTUNE = _runtime(
    [
        _job(
            "dataset-initializer",
            "dataset-initializer",
            "dataset-initializer",
            [{"name": "initializer", "mountPath": "/workspace/dataset"}],
        ),
        _job(
            "model-initializer",
            "model-initializer",
            "model-initializer",
            [{"name": "initializer", "mountPath": "/workspace/model"}],
        ),
        _job(
            "node",
            "trainer",
            "node",
            [
                {"name": "initializer", "mountPath": "/workspace/dataset"},
                {"name": "initializer", "mountPath": "/workspace/model"},
                {"name": "scratch", "mountPath": "/tmp/scratch"},
            ],
        ),
    ],
    {"torch": {}},
)
# Shaped like upstream MPI runtimes: `node` has no ancestor label, `launcher` does; neither mounts anything.
MPI = _runtime(
    [_job("launcher", "trainer", "node", []), _job("node", None, "node", [])],
    {"mpi": {"numProcPerNode": 1, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/home/mpiuser/.ssh"}},
)


@pytest.mark.parametrize("runtime", [TORCHTUNE, MPI], ids=["torchtune", "mpi"])
def test_injection_mounts_the_team_claim_at_workspace_in_initializer_and_trainer_jobs(runtime: dict[str, Any]) -> None:
    v = validate({**MINIMAL, "storage": {"efs": {"fileSystemId": "fs-1"}}, "teams": TEAMS})
    before = copy.deepcopy(runtime)
    out = apply_injections(v.serve.facts, runtime)
    assert runtime == before, "injections never mutate their input"
    for job in out["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        assert {"name": "initializer", "persistentVolumeClaim": {"claimName": "workspace"}} in pod["volumes"]
        assert len([v for v in pod["volumes"] if v["name"] == "initializer"]) == 1
        for container in pod["containers"]:
            mounts = container["volumeMounts"]
            assert [(m["mountPath"], m.get("subPathExpr")) for m in mounts if m["name"] == "initializer"] == [
                ("/workspace", "jobs/$(TRAIN_JOB_NAME)")
            ]
            assert len({m["mountPath"] for m in mounts}) == len(mounts), "no two mounts at one path"
            name_env = next(e for e in container["env"] if e["name"] == "TRAIN_JOB_NAME")
            assert name_env["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/jobset-name']"
    assert workspace_disagreement(out) is None
    node = out["spec"]["template"]["spec"]["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
    if runtime is TORCHTUNE:
        assert {"name": "scratch", "mountPath": "/tmp/scratch"} in node["containers"][0]["volumeMounts"]
    checker = Conformance("1.34", crd_versions(v))
    assert checker.check(out) == []


def _volumes_and_mounts(runtime: dict[str, Any]) -> list[Any]:
    pods = [j["template"]["spec"]["template"]["spec"] for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]]
    return [(p.get("volumes"), [(c.get("volumeMounts"), c.get("env")) for c in p["containers"]]) for p in pods]


def test_without_storage_runtimes_keep_their_volumes() -> None:
    runtimes = {"defaultResources": None, "securityContext": {"enabled": False}}  # HOME/scratch: test_pod_security
    v = validate({**MINIMAL, "teams": TEAMS_NO_STORAGE, "runtimes": runtimes})
    assert _volumes_and_mounts(apply_injections(v.serve.facts, TORCHTUNE)) == _volumes_and_mounts(TORCHTUNE)


def _expand(runtime: dict[str, Any], trainjob: str) -> set[tuple[str, str]]:
    """Where each container's /workspace lands on the claim for a TrainJob, expanded as kubelet does
    (env from the downward-API label JobSet puts on the pod: the JobSet is named after the TrainJob)."""
    out = set()
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in job["template"]["spec"]["template"]["spec"]["containers"]:
            env = {
                e["name"]: trainjob
                for e in c.get("env", [])
                if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
                == "metadata.labels['jobset.sigs.k8s.io/jobset-name']"
            }
            for m in c["volumeMounts"]:
                if m["name"] == "initializer":
                    sub = m["subPathExpr"]
                    for k, val in env.items():
                        sub = sub.replace(f"$({k})", val)
                    out.add((m["mountPath"], sub))
    return out


def test_two_trainjobs_of_a_team_get_distinct_directories_their_steps_agree_on() -> None:
    v = validate({**MINIMAL, "storage": {"efs": {"fileSystemId": "fs-1"}}, "teams": TEAMS})
    out = apply_injections(v.serve.facts, TORCHTUNE)
    assert _expand(out, "tune-a") == {("/workspace", "jobs/tune-a")}
    assert _expand(out, "tune-b") == {("/workspace", "jobs/tune-b")}
    node = out["spec"]["template"]["spec"]["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
    assert {"name": "CHECKPOINT_DIR", "value": "/workspace/checkpoints"} in node["containers"][0]["env"]


def test_a_runtime_whose_steps_disagree_on_the_job_directory_is_named_with_both_paths() -> None:
    v = validate({**MINIMAL, "storage": {"efs": {"fileSystemId": "fs-1"}}, "teams": TEAMS})
    leaky = copy.deepcopy(TORCHTUNE)
    node = leaky["spec"]["template"]["spec"]["replicatedJobs"][-1]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["volumeMounts"].append({"name": "initializer", "mountPath": "/data"})
    why = workspace_disagreement(apply_injections(v.serve.facts, leaky))
    assert why is not None
    assert "node/node: /data → <claim root>" in why
    assert "dataset-initializer/dataset-initializer: /workspace → jobs/$(TRAIN_JOB_NAME)" in why
    pinned = copy.deepcopy(TORCHTUNE)
    first = pinned["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    first["containers"][0]["env"] = [{"name": "TRAIN_JOB_NAME", "value": "shared"}]
    why = workspace_disagreement(apply_injections(v.serve.facts, pinned))
    assert why is not None and "TRAIN_JOB_NAME: value 'shared'" in why


def test_initializers_read_the_hf_token_where_a_team_has_one() -> None:
    no_home = {"securityContext": {"enabled": False}}  # its HOME env: tests/catalog/test_security_context.py
    v = validate({**MINIMAL, "teams": [{"name": "a", "secrets": {"hfToken": "hf_x"}}], "runtimes": no_home})
    jobs = apply_injections(v.serve.facts, TORCHTUNE)["spec"]["template"]["spec"]["replicatedJobs"]
    env = {j["name"]: j["template"]["spec"]["template"]["spec"]["containers"][0].get("env", []) for j in jobs}
    ref = {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}}
    assert env["dataset-initializer"] == env["model-initializer"] == [{"name": "HF_TOKEN", "valueFrom": ref}]
    assert env["node"] == []


def test_without_installing_lws_the_chart_renders_no_lws() -> None:
    """The chart's subchart condition reads dataCache.enabled first: with installLws false we must turn it off."""
    raw = {**MINIMAL, "dataCache": {"enabled": True, "installLws": False}, "teams": TEAMS_NO_STORAGE}
    chart = next(r for r in render(raw).releases if r["name"] == "trainer")["values"]
    assert chart["dataCache"]["enabled"] is False and "lws" not in chart


def test_data_cache_installs_lws_with_trainer_and_rbac_in_every_team_namespace() -> None:
    raw = {**MINIMAL, "dataCache": {"enabled": True}, "teams": TEAMS_NO_STORAGE, "images": {"registryMirror": "m.corp"}}
    rendered = render(raw)
    chart = next(r for r in rendered.releases if r["name"] == "trainer")["values"]
    values = chart["dataCache"]
    assert values["enabled"] is True and values["lws"] == {"install": True}
    # Pinned (the Trainer version's tag, as the chart would pick) and through the mirror.
    assert values["cacheImage"] == {
        "registry": "m.corp",
        "repository": "ghcr.io/kubeflow/trainer/data-cache",
        "tag": "v2.2.1",
    }
    assert values["runtimes"]["torchDistributedWithCache"] == {"enabled": False}
    # The LWS subchart reads top-level `lws:`; its image goes through the mirror too, and its controller
    # gets the Trainer controller's resources (the subchart's default has requests only, no memory limit).
    assert chart["lws"]["image"] == {"manager": {"repository": "m.corp/registry.k8s.io/lws/lws", "tag": "v0.8.0"}}
    assert chart["lws"]["resources"] == chart["manager"]["resources"]
    assert chart["lws"]["resources"]["limits"]["memory"]
    role = next(m for m in rendered.manifests if m["kind"] == "ClusterRole" and m["metadata"]["name"] == CACHE_ROLE)
    # cache.py reads its TrainJob first; upstream's role lacks this (trainer#3945).
    assert {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]} in role["rules"]
    for ns in ("nlp", "cv"):
        binding = next(
            m
            for m in rendered.manifests
            if m["kind"] == "RoleBinding"
            and m["metadata"].get("namespace") == ns
            and m["metadata"]["name"] == "kubeflow-trainer-cache-initializer"
        )
        assert binding["roleRef"]["name"] == CACHE_ROLE
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "kubeflow-trainer-cache-initializer", "namespace": ns}
        ]
    cache_runtime = next(m for m in rendered.manifests if m["metadata"]["name"] == "torch-distributed-with-cache")
    env = [
        e
        for j in cache_runtime["spec"]["template"]["spec"]["replicatedJobs"]
        for c in j["template"]["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
        if e["name"] == "CACHE_IMAGE"
    ]
    assert [e["value"] for e in env] == ["m.corp/ghcr.io/kubeflow/trainer/data-cache:v2.2.1"]
    kueue = yaml.safe_load(
        next(r for r in rendered.releases if r["name"] == "kueue")["values"]["managerConfig"][
            "controllerManagerConfigYaml"
        ]
    )
    assert "leaderworkerset.x-k8s.io/leaderworkerset" in kueue["integrations"]["frameworks"]
    assert conformance_findings(raw, rendered) == []
