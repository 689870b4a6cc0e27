"""Proof that every served runtime works, for each supported Trainer version (runtime × check):

1. `crd`: valid against the (Cluster)TrainingRuntime CRD schema of that version, CEL rules included;
2. `roundtrip`: no field lost through the official `kubeflow-trainer-api` models of that version;
3. `sdk_runtime`: the real `kubeflow` SDK turns it into its `Runtime` with the right framework and trainer;
4. `sdk_trainjob`: the SDK builds a TrainJob for it (CustomTrainer, or BuiltinTrainer(TorchTuneConfig) with
   initializers for torchtune) that is valid against the TrainJob CRD of the same version;
5. `webhook`: the Trainer webhook rules hold for the runtime and for that TrainJob.

The stacks are the local stack (all injections) with the data cache on, plus one team-scoped TrainingRuntime.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from kubeflow.trainer import BuiltinTrainer, CustomTrainer, TorchTuneConfig
from kubeflow.trainer.types.types import HuggingFaceDatasetInitializer, HuggingFaceModelInitializer, Initializer

from tests.catalog.test_catalog_plan import DATA_CACHE_ON
from tests.conformance import Conformance
from tests.helpers import crd_versions, stack_raw
from tests.sdk_harness import FakeCluster, sdk_against
from tests.trainer_api import lost_fields, round_trip
from trainer_infra.catalog.webhook import runtime_findings, trainjob_findings
from trainer_infra.components.settings import deep_merge
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

VERSIONS = ("2.2.1", "2.3.0")
KUBERNETES = "1.34"
TEAM_NS = "vision"


def stack(version: str) -> dict[str, Any]:
    """The local stack (node pools with TAS placement, team storage, team secrets: every injection runs),
    the data cache on, and one team runtime."""
    extra: dict[str, Any] = {
        "components": {"trainer": {"version": version}},
        "runtimes": {"teams": [{"team": "vision", "runtime": "torch-distributed"}]},
    }
    if version.startswith("2.3"):
        extra["components"]["kueue"] = {"trainJobIntegration": False}  # Kueue 0.19 targets the 2.2 TrainJob API
    return deep_merge(deep_merge(stack_raw("local"), extra), DATA_CACHE_ON)


def _key(obj: dict[str, Any]) -> str:
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else str(md["name"])


@cache
def served(version: str) -> dict[str, dict[str, Any]]:
    plan = build_plan(validate(stack(version)))
    return {_key(o.manifest): o.manifest for o in plan.objects if o.manifest["kind"].endswith("TrainingRuntime")}


@cache
def conformance(version: str) -> Conformance:
    return Conformance(KUBERNETES, crd_versions(validate(stack(version))))


@cache
def round_tripped(version: str) -> dict[str, dict[str, Any]]:
    keys = list(served(version))
    after = round_trip([served(version)[k] for k in keys], version)
    return dict(zip(keys, after, strict=True))


CASES = [pytest.param(v, k, id=f"{v}-{k}") for v in VERSIONS for k in served(v)]


def train_func() -> None:
    """The data scientist's function the SDK embeds into the TrainJob command."""
    print("training")


def _sdk(version: str, key: str) -> Any:
    namespace = key.split("/")[0] if "/" in key else "default"
    cluster = FakeCluster(list(served(version).values()), version)
    return cluster, sdk_against(cluster, namespace)


@cache
def sdk_trainjob(version: str, key: str) -> dict[str, Any]:
    runtime = served(version)[key]
    cluster, client = _sdk(version, key)
    with client as sdk:
        if runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torchtune":
            initializer = Initializer(
                dataset=HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca/data"),
                model=HuggingFaceModelInitializer(storage_uri="hf://meta-llama/Llama-3.2-1B-Instruct"),
            )
            trainer = BuiltinTrainer(config=TorchTuneConfig(epochs=1, batch_size=4, num_nodes=1))
            sdk.train(runtime=sdk.get_runtime(runtime["metadata"]["name"]), initializer=initializer, trainer=trainer)
        else:
            trainer_ = CustomTrainer(func=train_func, num_nodes=2, resources_per_node={"cpu": 2, "memory": "8Gi"})
            sdk.train(runtime=runtime["metadata"]["name"], trainer=trainer_)
    (namespace, plural, body), *_ = cluster.created
    assert plural == "trainjobs"
    body["metadata"]["namespace"] = namespace  # what the API server sets from the request path
    trainjob: dict[str, Any] = body
    return trainjob


@pytest.mark.parametrize(("version", "key"), CASES)
def test_crd(version: str, key: str) -> None:
    findings = conformance(version).check(served(version)[key])
    assert findings == [], "\n".join(map(str, findings))


@pytest.mark.parametrize(("version", "key"), CASES)
def test_roundtrip(version: str, key: str) -> None:
    assert lost_fields(served(version)[key], round_tripped(version)[key]) == []


@pytest.mark.parametrize(("version", "key"), CASES)
def test_sdk_runtime(version: str, key: str) -> None:
    runtime = served(version)[key]
    _, client = _sdk(version, key)
    with client as sdk:
        listed = {r.name: r for r in sdk.list_runtimes()}
        got = sdk.get_runtime(runtime["metadata"]["name"])
    framework = runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"]
    assert got == listed[got.name]
    assert got.kind.value == runtime["kind"]
    assert got.trainer.framework == framework
    assert got.trainer.trainer_type.value == ("BuiltinTrainer" if framework == "torchtune" else "CustomTrainer")
    assert got.trainer.num_nodes == runtime["spec"]["mlPolicy"]["numNodes"]
    node_images = {
        c["image"]
        for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        for c in j["template"]["spec"]["template"]["spec"]["containers"]
        if c["name"] == "node"
    }
    assert node_images == {got.trainer.image}
    expected_command = {"torchtune": "tune", "deepspeed": "mpirun", "mlx": "mpirun", "torch": "torchrun"}
    assert expected_command.get(framework, "python") in " ".join(got.trainer.command)


@pytest.mark.parametrize(("version", "key"), CASES)
def test_sdk_trainjob(version: str, key: str) -> None:
    trainjob = sdk_trainjob(version, key)
    assert trainjob["spec"]["runtimeRef"] == {"kind": served(version)[key]["kind"], "name": key.split("/")[-1]}
    findings = conformance(version).check(trainjob)
    assert findings == [], "\n".join(map(str, findings))


@pytest.mark.parametrize(("version", "key"), CASES)
def test_webhook(version: str, key: str) -> None:
    runtime = served(version)[key]
    cache_initializer = "data-cache" in runtime["metadata"]["annotations"].get("trainer-platform.io/requires", "")
    assert runtime_findings(runtime, initializer_volume=not cache_initializer) == []
    assert trainjob_findings(sdk_trainjob(version, key), runtime) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_sdk_lists_every_runtime_with_its_framework(version: str) -> None:
    """What a data scientist in the team namespace sees: the whole catalog, the team's runtime shadowing
    the cluster one of the same name (the SDK prefers namespaced runtimes)."""
    _, client = _sdk(version, f"{TEAM_NS}/x")
    with client as sdk:
        listed = {r.name: (r.kind.value, r.trainer.framework) for r in sdk.list_runtimes()}
    expected = {
        o["metadata"]["name"]: (o["kind"], o["metadata"]["labels"]["trainer.kubeflow.org/framework"])
        for k, o in sorted(served(version).items(), key=lambda kv: "/" in kv[0])  # namespaced last: they win
    }
    assert listed == expected
    assert listed["torch-distributed"][0] == "TrainingRuntime"


def test_webhook_rules_catch_what_the_trainer_refuses() -> None:
    """The offline rules are not vacuous: reserved env names and an initializer the runtime cannot serve."""
    runtime = served("2.2.1")["torch-distributed"]
    cluster, client = _sdk("2.2.1", "torch-distributed")
    with client as sdk:
        sdk.train(runtime="torch-distributed", trainer=CustomTrainer(func=train_func, env={"PET_NNODES": "9"}))
        sdk.train(
            runtime="torch-distributed",
            initializer=Initializer(dataset=HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca")),
            trainer=CustomTrainer(func=train_func),
        )
    reserved, initializer = (body for _, _, body in cluster.created)
    assert trainjob_findings(reserved, runtime) == [
        ("spec.trainer.env[0].name", "PET_NNODES is reserved by the ML policy")
    ]
    assert trainjob_findings(initializer, runtime) == [
        ("spec.runtimeRef", "runtime has no dataset-initializer job but spec.initializer.dataset is set")
    ]
