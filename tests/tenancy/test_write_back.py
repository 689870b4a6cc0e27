"""What Kueue's write-back of an admitted TrainJob would drop is refused at submit, with where and what to do
(tenancy/admission/write_back.py); the field list covers the CRD; the SDK's own TrainJobs are judged as sent."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conformance.crds import crds_dir, load_crds
from tests.helpers import render, stack_raw
from tests.sdk_harness import FakeCluster, sdk_against
from tests.tenancy import cel_admission
from tests.tenancy.write_back.generate import TRAINJOB, immutable_paths
from trainer_infra.tenancy.admission.policy import policy_name
from trainer_infra.tenancy.admission.write_back import prune, write_back_data
from trainer_infra.versions.matrix import MATRIX

Obj = dict[str, Any]
TEAM_LABEL = "trainer-platform.io/team"
KUEUE_PATCH = "kueue.x-k8s.io/manager"
POD = "runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec"


@pytest.fixture(scope="module")
def rendered() -> list[Obj]:
    return render(stack_raw("local")).manifests


def _team(manifests: list[Obj]) -> tuple[str, dict[str, str], str]:
    """The first team namespace of the render: its name, annotations (the allow-lists) and LocalQueue."""
    ns = next(m for m in manifests if m["kind"] == "Namespace" and TEAM_LABEL in m["metadata"].get("labels", {}))
    name = ns["metadata"]["name"]
    queue = next(m for m in manifests if m["kind"] == "LocalQueue" and m["metadata"]["namespace"] == name)
    return name, ns["metadata"]["annotations"], queue["metadata"]["name"]


def _judge(manifests: list[Obj], job: Obj, **request: Any) -> list[str]:
    (policy,) = [
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicy" and m["metadata"]["name"] == policy_name("TrainJob")
    ]
    ns, annotations, _ = _team(manifests)
    return cel_admission.refusals(policy, job, namespace=ns, namespace_annotations=annotations, **request)


def _job(manifests: list[Obj], trainer: Obj | None = None, **spec: Any) -> Obj:
    ns, _, queue = _team(manifests)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": trainer or {"numNodes": 1, "env": [{"name": "EPOCHS", "value": "3"}]},
            **spec,
        },
    }


def _patch(pod: Obj, manager: str = "example.com/me") -> list[Obj]:
    rj = {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}
    return [{"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rj]}}}}]


def _mount(extra: Obj) -> Obj:
    """A runtime patch pod whose trainer container mounts volume `w` with ``extra`` set."""
    return {"containers": [{"name": "node", "volumeMounts": [{"name": "w", "mountPath": "/w", **extra}]}]}


def write_back_refusals(found: list[str]) -> list[str]:
    return [f for f in found if "Kueue drops such values" in f]


#: lists whose Go field has no `omitempty` (Kubernetes' own types): an empty one is written back as it was
KEPT_EMPTY = {f"{POD}.volumes[].{f}" for f in ("cephfs.monitors", "projected.sources", "rbd.monitors")}


def test_the_field_list_covers_every_list_and_map_the_crd_holds_immutable() -> None:
    """Lists and maps are visible in the schema: a Trainer whose CRD adds one fails here until
    `make kueue-write-back` has regenerated the list (the scalars need the Go types, see the generator)."""
    data = write_back_data()
    schema = load_crds(str(crds_dir()), "trainer", data["trainer"])[TRAINJOB]["schema"]
    frozen = immutable_paths(schema)

    def collections(node: Obj, path: str) -> set[str]:
        out = set()
        if path in frozen and (node.get("type") == "array" or isinstance(node.get("additionalProperties"), dict)):
            out.add(path.removeprefix("spec."))
        for key, child in (node.get("properties") or {}).items():
            out |= collections(child, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            out |= collections(node["items"], f"{path}[]")
        return out

    listed = data["fields"]
    assert collections(schema["properties"]["spec"], "spec") == set(listed["collection"]) | KEPT_EMPTY
    every = {p for paths in listed.values() for p in paths}
    assert {f"spec.{p}" for p in every} <= frozen, "a listed field the CRD does not hold immutable"
    assert f"{POD}.containers[].volumeMounts[].readOnly" in listed["bool"]  # kubeflow/trainer#3888's example
    assert "trainer.env[].value" in listed["string"]


def test_every_kueue_that_writes_back_speaks_the_generated_trainer_api() -> None:
    trainer = MATRIX.components["trainer"].release(write_back_data()["trainer"])
    assert trainer is not None and trainer.train_job_api
    writers = [r for r in MATRIX.components["kueue"].releases if r.train_job_full_update]
    assert writers, "no Kueue in the matrix writes back: drop the rules or the flag"
    for kueue in writers:
        assert kueue.train_job_api == trainer.train_job_api, (
            f"Kueue {kueue.version} is built against TrainJob API {kueue.train_job_api}: regenerate write_back.yaml "
            "from that Trainer version (tests/tenancy/write_back/go.mod, make kueue-write-back)"
        )


DROPPED = {
    "empty trainer env": ("spec.trainer", {"trainer": {"numNodes": 1, "env": []}}),
    "empty env value": ("spec.trainer", {"trainer": {"env": [{"name": "DEBUG", "value": ""}]}}),
    "empty command": ("spec.trainer", {"trainer": {"command": []}}),
    "empty requests map": ("spec.trainer", {"trainer": {"resourcesPerNode": {"requests": {}}}}),
    "empty dataset env": ("spec.initializer", {"initializer": {"dataset": {"storageUri": "hf://x/y", "env": []}}}),
    "readOnly: false mount": ("spec.runtimePatches", {"runtimePatches": _patch(_mount({"readOnly": False}))}),
    "empty subPath": ("spec.runtimePatches", {"runtimePatches": _patch(_mount({"subPath": ""}))}),
    "readOnly: false claim": (
        "spec.runtimePatches",
        {
            "runtimePatches": _patch(
                {"volumes": [{"name": "w", "persistentVolumeClaim": {"claimName": "c", "readOnly": False}}]}
            )
        },
    ),
}


@pytest.mark.parametrize("case", sorted(DROPPED))
def test_what_the_write_back_drops_is_refused_naming_where(rendered: list[Obj], case: str) -> None:
    where, spec = DROPPED[case]
    job = _job(rendered)
    job["spec"].update(copy.deepcopy(spec))
    found = write_back_refusals(_judge(rendered, job))
    assert len(found) == 1 and found[0].startswith(f"TrainJob tj refused: {where} holds"), found
    assert "leave the field out" in found[0]


@pytest.mark.parametrize("case", sorted(DROPPED))
def test_prune_leaves_out_exactly_what_the_rules_refuse(rendered: list[Obj], case: str) -> None:
    """`prune` (what `migrate` applies to the TrainJobs it writes) is the Python of the rules' CEL."""
    job = _job(rendered)
    job["spec"].update(copy.deepcopy(DROPPED[case][1]))
    before = copy.deepcopy(job)
    prune(job["spec"])
    assert job != before and write_back_refusals(_judge(rendered, job)) == []
    honest = _job(rendered, {"numNodes": 1, "env": [{"name": "A", "value": "0"}], "command": ["python3"]})
    kept = copy.deepcopy(honest)
    prune(honest["spec"])
    assert honest == kept


def test_the_same_jobs_without_the_empty_values_pass(rendered: list[Obj]) -> None:
    honest = _job(rendered, {"numNodes": 1, "command": ["python3"], "resourcesPerNode": {"requests": {"cpu": "1"}}})
    honest["spec"]["runtimePatches"] = _patch(_mount({"readOnly": True}))
    token = [{"name": "ACCESS_TOKEN", "value": "t"}]
    honest["spec"]["initializer"] = {"dataset": {"storageUri": "hf://x/y", "env": token}}
    assert write_back_refusals(_judge(rendered, honest)) == []


def test_kueues_own_write_back_of_an_admitted_job_passes(rendered: list[Obj]) -> None:
    """What Kueue writes is Go-encoded (nothing empty left): its update of an honest job is not refused."""
    old = _job(rendered)
    old["spec"]["suspend"] = True
    old["spec"]["runtimePatches"] = [{"manager": KUEUE_PATCH, "trainingRuntimeSpec": {}}]
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    new["spec"]["runtimePatches"] = _patch({"nodeSelector": {"pool": "a100"}}, manager=KUEUE_PATCH)
    kueue = "system:serviceaccount:kueue-system:kueue-controller-manager"
    assert write_back_refusals(_judge(rendered, new, old=old, user=kueue)) == []


def _train() -> None:
    print("training")


def test_the_sdks_dataset_initializer_without_options_is_refused_with_the_workaround(rendered: list[Obj]) -> None:
    """The kubeflow SDK sends `env: []` for a HuggingFace or S3 dataset with no option set: refused here, with the
    SDK workaround in the message, instead of a job that never starts; with an option it passes."""
    from kubeflow.trainer import CustomTrainer, HuggingFaceDatasetInitializer, Initializer

    ns, _, queue = _team(rendered)
    runtimes = [m for m in rendered if m["kind"] == "ClusterTrainingRuntime"]

    def submitted(dataset: HuggingFaceDatasetInitializer) -> Obj:
        cluster = FakeCluster(runtimes)
        with sdk_against(cluster, ns) as sdk:
            sdk.train(
                runtime=sdk.get_runtime("torch-distributed"),
                trainer=CustomTrainer(func=_train, num_nodes=1, resources_per_node={"gpu": 1, "cpu": 2}),
                initializer=Initializer(dataset=dataset),
            )
        (body,) = [b for _, plural, b in cluster.created if plural == "trainjobs"]
        body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
        return body

    bare = submitted(HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca"))
    assert bare["spec"]["initializer"]["dataset"]["env"] == []  # what the SDK sends (kubeflow 0.5)
    (found,) = write_back_refusals(_judge(rendered, bare))
    assert "spec.initializer holds" in found and "ignore_patterns" in found
    dataset = HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca", ignore_patterns=["*.md"])
    with_option = submitted(dataset)
    assert write_back_refusals(_judge(rendered, with_option)) == []


def test_no_rule_where_kueue_does_not_manage_trainjobs() -> None:
    raw = stack_raw("local")
    raw.setdefault("components", {}).setdefault("kueue", {})["trainJobIntegration"] = False
    policies = [m for m in render(raw).manifests if m["kind"] == "ValidatingAdmissionPolicy"]
    assert policies and not [
        v for p in policies for v in p["spec"]["validations"] if "Kueue drops such values" in v["message"]
    ]
