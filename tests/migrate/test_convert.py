"""What a migrated job looks like, per kind and per decision the converter makes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.conformance import Conformance
from tests.migrate.helpers import IMAGE, job, local_target, node_image, options_for, run
from trainer_infra.migrate.mapping import Disposition
from trainer_infra.migrate.report import dump
from trainer_infra.migrate.result import Options, Status
from trainer_infra.migrate.trainjob import SOURCE_ANNOTATION

PT = ("kubeflow.org/v1", "PyTorchJob")
MPI = ("kubeflow.org/v2beta1", "MPIJob")
ALL = [("kubeflow.org/v1", k) for k in ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "JAXJob", "PaddleJob")] + [MPI]


def master(obj: dict[str, Any], replica: str = "Master") -> dict[str, Any]:
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    spec: dict[str, Any] = obj["spec"][field][replica]
    return spec


def container(obj: dict[str, Any], replica: str = "Master") -> dict[str, Any]:
    c: dict[str, Any] = master(obj, replica)["template"]["spec"]["containers"][0]
    return c


def both(obj: dict[str, Any], fn: Any) -> None:
    for replica in ("Master", "Worker"):
        fn(master(obj, replica))


def lossy(result: Any) -> list[str]:
    return [f.path for f in result.findings if f.disposition is Disposition.LOSSY]


def test_pytorchjob_becomes_a_torch_trainjob_in_the_team_queue() -> None:
    obj = job(*PT)
    obj["metadata"]["labels"] = {"app": "mnist"}
    obj["spec"]["nprocPerNode"] = "4"
    obj["spec"]["runPolicy"] = {
        "activeDeadlineSeconds": 600,
        "suspend": True,
        "schedulingPolicy": {"priorityClass": "high"},
    }
    master(obj, "Worker")["replicas"] = 3

    def fill(spec: dict[str, Any]) -> None:
        c = spec["template"]["spec"]["containers"][0]
        c.update(
            env=[{"name": "EPOCHS", "value": "2"}],
            resources={"limits": {"nvidia.com/gpu": 8}},
            volumeMounts=[{"name": "ws", "mountPath": "/workspace"}],
        )
        spec["template"]["spec"]["volumes"] = [{"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}}]
        spec["template"]["spec"]["tolerations"] = [{"key": "example.com/x", "operator": "Exists"}]

    both(obj, fill)
    r = run(obj)
    assert r.status == Status.CLEAN, r.findings
    t = r.trainjob
    assert t is not None
    assert t["metadata"]["labels"] == {
        "app": "mnist",
        "kueue.x-k8s.io/priority-class": "high",
        "kueue.x-k8s.io/queue-name": "default",
    }
    assert t["metadata"]["annotations"][SOURCE_ANNOTATION] == "kubeflow.org/v1/PyTorchJob nlp/train"
    assert t["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    assert t["spec"]["trainer"] == {
        "image": IMAGE,
        "command": ["torchrun", "train.py"],
        "env": [{"name": "EPOCHS", "value": "2"}],
        "numNodes": 4,
        "numProcPerNode": 4,
        "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}},
    }
    assert t["spec"]["activeDeadlineSeconds"] == 600 and t["spec"]["suspend"] is True
    patch = t["spec"]["runtimePatches"][0]
    assert patch["manager"] == "trainer-platform.io/migrate"
    job_patch = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert job_patch["name"] == "node"
    pod = job_patch["template"]["spec"]["template"]["spec"]
    # the team claim through the runtime's own volume: a second volume of one claim never mounts (kubernetes#132921)
    assert pod["containers"] == [{"name": "node", "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}]
    assert pod["volumes"] == [{"name": "initializer", "persistentVolumeClaim": {"claimName": "workspace"}}]
    assert "torch runtime torch-distributed" in r.reason


def test_worker_template_differences_are_reported_and_can_be_allowed() -> None:
    obj = job(*PT)
    container(obj, "Worker")["args"] = ["--worker"]
    r = run(obj)
    path = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].args"
    assert r.status == Status.NEEDS_FLAG and lossy(r) == [path] and r.trainjob is None
    for name in (path, "spec.pytorchReplicaSpecs.Worker", "spec.*.Worker.template.spec.containers.args"):
        allowed = run(obj, options=Options(allow_lossy=(name,)))
        assert allowed.status == Status.ALLOWED and allowed.trainjob is not None
        assert "args" not in allowed.trainjob["spec"]["trainer"]  # the Master's template wins
    assert run(obj, options=Options(allow_lossy=("spec.pytorchReplicaSpecs.Master",))).status == Status.NEEDS_FLAG


@pytest.mark.parametrize(
    ("launcher", "runtime"),
    [
        ({"command": ["deepspeed", "--hostfile", "/etc/mpi/hostfile", "train.py"]}, "deepspeed-distributed"),
        ({"command": ["mpirun"], "args": ["-np", "4", "deepspeed", "train.py"]}, "deepspeed-distributed"),
        (
            {"image": "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.2.1", "command": ["mpirun", "python", "t.py"]},
            "deepspeed-distributed",
        ),
    ],
)
def test_mpijob_running_deepspeed_gets_the_deepspeed_runtime(launcher: dict[str, Any], runtime: str) -> None:
    obj = job(*MPI)
    container(obj, "Launcher").update(launcher)
    r = run(obj, options=Options())
    assert r.runtime == runtime and "deepspeed" in r.reason, r.errors


def test_plain_mpijob_needs_an_mpi_runtime_or_runtime_flag() -> None:
    obj = job(*MPI)
    container(obj, "Launcher")["command"] = ["mpirun", "-np", "4", "python", "horovod_train.py"]
    r = run(obj, options=Options())
    assert r.status == Status.CANNOT
    assert "serves no runtime for framework mpi" in r.errors[0].message and "--runtime" in r.errors[0].hint
    forced = run(obj, options=Options(runtime="deepspeed-distributed"))
    assert forced.status == Status.CLEAN and forced.reason.startswith("--runtime deepspeed-distributed")


def test_mpijob_nodes_are_the_workers_and_get_the_workers_resources() -> None:
    t = local_target()
    obj = job(*MPI)
    obj["spec"]["slotsPerWorker"] = 8
    worker = container(obj, "Worker")
    worker["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    master(obj, "Worker")["template"]["spec"]["nodeSelector"] = {"pool": "h100"}
    r = run(obj)
    assert r.status == Status.CLEAN, r.findings
    assert r.trainjob is not None
    trainer = r.trainjob["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 8)
    assert trainer["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert trainer["command"] == ["deepspeed", "train.py"]
    jobs = r.trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert jobs == [{"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "h100"}}}}}}]
    worker["image"] = IMAGE
    container(obj, "Launcher")["resources"] = {"limits": {"cpu": "1"}}
    r = run(obj)
    assert lossy(r) == [
        "spec.mpiReplicaSpecs.Worker.template.spec.containers[0].image",
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].resources",
    ]
    assert node_image(t, "deepspeed-distributed") in r.findings[-2].message or any(
        node_image(t, "deepspeed-distributed") in f.message for f in r.findings
    )


@pytest.mark.parametrize(
    ("value", "expected", "reported"), [("4", 4, False), (2, 2, False), ("auto", None, False), ("gpu", None, True)]
)
def test_nproc_per_node(value: Any, expected: int | None, reported: bool) -> None:
    obj = job(*PT)
    obj["spec"]["nprocPerNode"] = value
    r = run(obj, options=Options(allow_lossy=("spec.nprocPerNode",)))
    assert r.trainjob is not None
    assert r.trainjob["spec"]["trainer"].get("numProcPerNode") == expected
    assert (lossy(r) == ["spec.nprocPerNode"]) is reported


def test_termination_grace_period_needs_trainer_2_3() -> None:
    obj = job(*PT)
    both(obj, lambda s: s["template"]["spec"].update(terminationGracePeriodSeconds=120))
    old = run(obj, target=local_target("2.2.1"))
    assert lossy(old) == ["spec.pytorchReplicaSpecs.Master.template.spec.terminationGracePeriodSeconds"]
    new = run(obj, target=local_target("2.3.0"))
    assert new.status == Status.CLEAN and new.trainjob is not None
    patch = new.trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert patch["template"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


def test_a_command_that_is_not_torchrun_is_reported() -> None:
    obj = job(*PT)
    both(obj, lambda s: s["template"]["spec"]["containers"][0].update(command=["python", "/opt/mnist.py"]))
    r = run(obj)
    assert lossy(r) == ["spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command"]
    assert "torchrun" in r.findings[-1].message or any("torchrun" in f.message for f in r.findings)
    both(
        obj,
        lambda s: s["template"]["spec"]["containers"][0].update(
            command=["python", "-m", "torch.distributed.run", "/opt/mnist.py"]
        ),
    )
    assert run(obj).status == Status.CLEAN


def test_sidecars_init_containers_and_parameter_servers_are_reported() -> None:
    obj = job(*PT)
    both(obj, lambda s: s["template"]["spec"]["containers"].append({"name": "logger", "image": "busybox:1.36"}))
    both(obj, lambda s: s["template"]["spec"].update(initContainers=[{"name": "fetch", "image": "busybox:1.36"}]))
    assert lossy(run(obj)) == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[1]",
        "spec.pytorchReplicaSpecs.Master.template.spec.initContainers",
    ]
    tf = job("kubeflow.org/v1", "TFJob")
    tf["spec"]["tfReplicaSpecs"]["PS"] = {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": IMAGE}]}},
    }
    assert lossy(run(tf)) == ["spec.tfReplicaSpecs.PS"]


def test_tfjob_and_paddlejob_have_no_runtime_in_the_catalog() -> None:
    for kind in ("TFJob", "PaddleJob"):
        r = run(job("kubeflow.org/v1", kind), options=Options())
        assert r.status == Status.CANNOT and "no runtime for framework" in r.errors[0].message


def test_queue_and_priority_must_exist_in_the_stack() -> None:
    obj = job(*PT)
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "defualt", "priorityClass": "urgent"}}
    r = run(obj)
    assert [(e.path, e.hint) for e in r.errors] == [
        ("spec.runPolicy.schedulingPolicy.queue", "did you mean 'default'?"),
        (
            "spec.runPolicy.schedulingPolicy.priorityClass",
            "pick one with --priority (the stack has: high, low, normal)",
        ),
    ]
    fixed = run(obj, options=Options(queue="default", priority="low"))
    assert fixed.trainjob is not None
    assert fixed.trainjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low"
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "default"}}
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "other"}
    assert "disagrees" in run(obj).errors[0].message


def test_namespace_must_be_a_team_namespace() -> None:
    obj = job(*PT)
    obj["metadata"]["namespace"] = "ml-legacy"
    r = run(obj)
    assert r.errors[0].path == "metadata.namespace" and "--namespace-map ml-legacy=" in r.errors[0].hint
    moved = run(obj, options=Options(namespace_map={"ml-legacy": "vision"}))
    assert moved.trainjob is not None and moved.trainjob["metadata"]["namespace"] == "vision"
    assert moved.trainjob["metadata"]["annotations"][SOURCE_ANNOTATION].endswith(" ml-legacy/train")


def test_reserved_env_names_are_refused_as_the_webhook_would() -> None:
    obj = job(*PT)
    both(obj, lambda s: s["template"]["spec"]["containers"][0].update(env=[{"name": "PET_NNODES", "value": "9"}]))
    r = run(obj)
    assert r.status == Status.CANNOT and "PET_NNODES is reserved" in r.errors[0].message


def test_multikueue_managed_jobs_stay_managed_by_multikueue() -> None:
    obj = job(*PT)
    obj["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    r = run(obj)
    assert r.trainjob is not None and r.trainjob["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    obj["spec"]["runPolicy"] = {"managedBy": "kubeflow.org/training-operator"}
    r = run(obj)
    assert r.status == Status.CLEAN and r.trainjob is not None and "managedBy" not in r.trainjob["spec"]


def test_output_does_not_depend_on_input_key_order() -> None:
    obj = job(*PT)
    obj["metadata"]["labels"] = {"b": "2", "a": "1"}
    flipped = copy.deepcopy(obj)
    flipped["metadata"]["labels"] = {"a": "1", "b": "2"}
    flipped["spec"] = dict(reversed(list(flipped["spec"].items())))
    first, second = run(obj).trainjob, run(flipped).trainjob
    assert first is not None and second is not None
    assert dump([first]) == dump([second])


def rich(api_version: str, kind: str) -> dict[str, Any]:
    """A job using most mapped fields, for the schema check."""
    obj = job(api_version, kind)
    obj["metadata"]["labels"] = {"app": "x"}
    obj["spec"]["runPolicy"] = {
        "activeDeadlineSeconds": 60,
        "suspend": False,
        "schedulingPolicy": {"queue": "default", "priorityClass": "normal"},
    }
    field = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    for spec in obj["spec"][field].values():
        tmpl = spec["template"]
        tmpl["metadata"] = {"labels": {"role": "train"}, "annotations": {"example.com/a": "b"}}
        tmpl["spec"].update(
            nodeSelector={"pool": "h100"},
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
            securityContext={"runAsUser": 1000, "fsGroup": 1000},
            serviceAccountName="default",
            imagePullSecrets=[{"name": "pull"}],
            schedulingGates=[{"name": "example.com/gate"}],
            volumes=[
                {"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}},
                {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            ],
        )
        c = tmpl["spec"]["containers"][0]
        c.update(
            env=[{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            resources={"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": 1}},
            volumeMounts=[{"name": "ws", "mountPath": "/ws"}],
            securityContext={"allowPrivilegeEscalation": False},
        )
        if kind == "MPIJob":
            c.pop("env")
    return obj


@pytest.mark.parametrize("trainer", ["2.2.1", "2.3.0"])
@pytest.mark.parametrize(("api_version", "kind"), ALL)
def test_migrated_jobs_pass_the_pinned_trainjob_crd(api_version: str, kind: str, trainer: str) -> None:
    """Schema and CEL rules of the Trainer CRDs (the conformance harness), beyond the run-time checks."""
    r = run(
        rich(api_version, kind),
        target=local_target(trainer),
        options=options_for(kind, allow_lossy=("spec.mpiReplicaSpecs.Launcher",)),
    )
    assert r.trainjob is not None, (r.errors, r.findings)
    checker = Conformance("1.34", {"trainer": trainer})
    assert checker.check(r.trainjob) == []


def test_a_launcher_that_was_a_worker_stays_a_training_host() -> None:
    obj = job(*MPI)
    obj["spec"]["runLauncherAsWorker"] = True
    r = run(obj)
    assert r.trainjob is not None and r.trainjob["spec"]["trainer"]["numNodes"] == 3


def test_a_migrated_job_holds_nothing_kueues_write_back_would_drop_and_passes_admission() -> None:
    """v1 templates often spell out empty values (`readOnly: false`, `value: ""`) and mount the claim under a name of
    their own; the TrainJob leaves the former out and mounts the claim through the runtime's volume, so the team
    policy of the render admits it (tenancy/admission/write_back.py, requests.PATCH_CLAIM_VOLUME)."""
    from tests.helpers import render, stack_raw
    from tests.tenancy import cel_admission

    obj = job(*PT)

    def fill(spec: dict[str, Any]) -> None:
        c = spec["template"]["spec"]["containers"][0]
        c.update(
            env=[{"name": "EPOCHS", "value": "2"}, {"name": "DEBUG", "value": ""}],
            volumeMounts=[{"name": "data", "mountPath": "/data", "readOnly": False, "subPath": ""}],
        )
        claim = {"claimName": "workspace", "readOnly": False}
        spec["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": claim}]

    both(obj, fill)
    r = run(obj)
    assert r.status == Status.CLEAN, r.findings
    t = r.trainjob
    assert t is not None
    assert t["spec"]["trainer"]["env"] == [{"name": "EPOCHS", "value": "2"}, {"name": "DEBUG"}]
    pod = t["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    spec = pod["template"]["spec"]["template"]["spec"]
    assert spec["volumes"] == [{"name": "initializer", "persistentVolumeClaim": {"claimName": "workspace"}}]
    assert spec["containers"][0]["volumeMounts"] == [{"name": "initializer", "mountPath": "/data"}]
    manifests = render(stack_raw("local")).manifests
    (policy,) = [
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicy" and m["metadata"]["name"].endswith("-trainjobs")
    ]
    (ns,) = [m for m in manifests if m["kind"] == "Namespace" and m["metadata"]["name"] == t["metadata"]["namespace"]]
    annotations = ns["metadata"]["annotations"]
    found = cel_admission.refusals(policy, t, namespace=ns["metadata"]["name"], namespace_annotations=annotations)
    assert found == []
