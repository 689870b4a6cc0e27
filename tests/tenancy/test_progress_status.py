"""Progress and ETA (Trainer's TrainJobStatus gate): on by default where the Trainer release has it; the teams'
training pods reach the status server's port and no other port of the controller; the pods of a TrainJob's JobSet
carry exactly what Trainer injects for that job, and nothing a member writes may name it (another job's token
audience would post that job's progress; a URL of the member's would send the job's token elsewhere)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.tenancy import cel_admission
from tests.tenancy.netpol_eval import Network, Pod
from trainer_infra.admission.model import AdmissionSettings, TeamAdmission
from trainer_infra.components.plan import resolve_releases
from trainer_infra.components.trainer import COMPONENT as TRAINER
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.upstream import trainer
from trainer_infra.core.upstream.kueue import QUEUE_LABEL
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import admission_objects, namespace_annotations, policy_name
from trainer_infra.tenancy.network import ControllerPort, NetworkSettings, network_policies
from trainer_infra.versions import MATRIX

Obj = dict[str, Any]
K8S = {"version": "1.34"}
URL = "https://trainer-kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
TEAM = TeamAdmission("vision", claims=("workspace",), queues=("q",))
ON = AdmissionSettings(teams=(TEAM,), trainer_identity="trainer", kueue_identity="kueue", status_server_url=URL)
OFF = AdmissionSettings(teams=(TEAM,), trainer_identity="trainer", kueue_identity="kueue")
MANAGER = {"app.kubernetes.io/name": "kubeflow-trainer", "app.kubernetes.io/instance": "trainer"}
MANAGER_LABELS = {**MANAGER, "app.kubernetes.io/component": "manager"}


def injected(job: str, ns: str = "vision") -> Obj:
    """A trainer pod spec as Trainer 2.2.1 gives it (trainjobstatus.go EnforceMLPolicy)."""
    volume = {
        "name": trainer.STATUS_TOKEN_VOLUME,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": trainer.status_audience(ns, job),
                        "expirationSeconds": 3600,
                        "path": "token",
                    }
                },
                {"configMap": {"name": f"{job}-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            ],
        },
    }
    env = [{"name": k, "value": v} for k, v in trainer.status_env(URL, ns, job).items()]
    mount = {"name": trainer.STATUS_TOKEN_VOLUME, "mountPath": trainer.STATUS_MOUNT_PATH, "readOnly": True}
    container = {"name": "node", "image": "x", "env": env, "volumeMounts": [mount]}
    return {"containers": [container], "volumes": [volume]}


def _policy(settings: AdmissionSettings, kind: str) -> Obj:
    (policy,) = [
        o
        for o in admission_objects(settings)
        if o["metadata"]["name"] == policy_name(kind) and o["kind"] == "ValidatingAdmissionPolicy"
    ]
    return policy


def _refusals(settings: AdmissionSettings, kind: str, obj: Obj) -> list[str]:
    return cel_admission.refusals(
        _policy(settings, kind), obj, namespace="vision", namespace_annotations=namespace_annotations(TEAM)
    )


def pod(spec: Obj, job: str = "mnist") -> Obj:
    """A pod of `job`'s JobSet, as the Job controller creates it."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": f"{job}-node-0", "uid": "1", "controller": True}
    meta = {"name": f"{job}-node-0-0", "labels": {JOBSET_NAME_LABEL: job}, "ownerReferences": [owner]}
    return {"metadata": meta, "spec": spec}


def jobset(spec: Obj, name: str = "mnist") -> Obj:
    job = {"name": "node", "template": {"spec": {"template": {"spec": spec}}}}
    return {"metadata": {"name": name}, "spec": {"replicatedJobs": [job]}}


def trainjob(spec: Obj | None = None, env: list[Obj] | None = None) -> Obj:
    meta = {"name": "mnist", "labels": {QUEUE_LABEL: "q"}}
    obj: Obj = {"metadata": meta, "spec": {"runtimeRef": {"name": "torch-distributed"}}}
    if spec is not None:
        patch = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": spec}}}}]}
        obj["spec"]["runtimePatches"] = [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": patch}}}]
    if env is not None:
        obj["spec"]["trainer"] = {"env": env}
    return obj


# -- admission ---------------------------------------------------------------------------------------


def test_what_trainer_injects_is_admitted_in_the_jobs_jobset_and_pods() -> None:
    assert _refusals(ON, "JobSet", jobset(injected("mnist"))) == []
    assert _refusals(ON, "Pod", pod(injected("mnist"))) == []


def test_another_jobs_token_or_ca_in_a_pod_is_refused_with_the_reason() -> None:
    """A pod of job `mnist` with the audience of job `resnet` could post resnet's progress."""
    for spec in (injected("resnet"), injected("mnist", ns="nlp")):
        (message,) = _refusals(ON, "Pod", pod(spec))
        assert "status server" in message and "post progress as another job" in message
        (message,) = _refusals(ON, "JobSet", jobset(spec))
        assert message.startswith("JobSet mnist refused: names what Trainer injects")


def test_the_status_audience_under_another_volume_name_is_refused() -> None:
    spec = injected("mnist")
    spec["volumes"][0]["name"] = "mine"
    spec["containers"][0]["volumeMounts"][0]["name"] = "mine"
    assert _refusals(ON, "Pod", pod(spec))


def test_the_url_pointing_elsewhere_is_refused() -> None:
    spec = injected("mnist")
    spec["containers"][0]["env"][0]["value"] = "https://attacker.example.com/steal"
    (message,) = _refusals(ON, "Pod", pod(spec))
    assert trainer.STATUS_URL_ENV in message
    spec["containers"][0]["env"][0] = {"name": trainer.STATUS_URL_ENV, "valueFrom": {"fieldRef": {"fieldPath": "x"}}}
    assert _refusals(ON, "Pod", pod(spec))


def test_a_member_cannot_name_the_volume_audience_configmap_or_env_in_a_trainjob() -> None:
    attacks = {
        "token": injected("mnist"),
        "audience": {"volumes": [copy.deepcopy(injected("other")["volumes"][0]) | {"name": "t"}]},
        "configmap": {"volumes": [{"name": "ca", "configMap": {"name": "other-tls-config"}}]},
        "mount": {
            "containers": [{"name": "node", "volumeMounts": [{"name": trainer.STATUS_TOKEN_VOLUME, "mountPath": "/t"}]}]
        },
        "env": {"containers": [{"name": "node", "env": [{"name": trainer.STATUS_TOKEN_ENV, "value": "/x"}]}]},
    }
    ours = "refused: names what Trainer injects"
    for what, spec in attacks.items():
        assert [m for m in _refusals(ON, "TrainJob", trainjob(spec)) if ours in m], what
        runtime = {"metadata": {"name": "rt"}, "spec": {"template": jobset(spec)}}
        assert [m for m in _refusals(ON, "TrainingRuntime", runtime) if ours in m], what
    assert not [m for m in _refusals(ON, "TrainJob", trainjob({"containers": [{"name": "node"}]})) if ours in m]
    env = [{"name": trainer.STATUS_URL_ENV, "value": "https://attacker.example.com"}]
    refused = [m for m in _refusals(ON, "TrainJob", trainjob(env=env)) if "spec.trainer.env" in m]
    assert refused and "send the job's token elsewhere" in refused[0]
    ok = [{"name": "LR", "value": "0.1"}]
    assert not [m for m in _refusals(ON, "TrainJob", trainjob(env=ok)) if "spec.trainer.env" in m]


def test_with_progress_off_nothing_of_it_is_admitted() -> None:
    assert _refusals(OFF, "Pod", pod(injected("mnist")))
    assert _refusals(OFF, "JobSet", jobset(injected("mnist")))


def test_tokens_for_other_audiences_stay_allowed() -> None:
    volume = {"name": "vault", "projected": {"sources": [{"serviceAccountToken": {"audience": "vault", "path": "t"}}]}}
    spec = {"containers": [{"name": "node", "image": "x"}], "volumes": [volume]}
    assert _refusals(ON, "Pod", pod(spec)) == []
    assert _refusals(ON, "TrainJob", trainjob(spec)) == []


# -- network -----------------------------------------------------------------------------------------


def _network(status: bool) -> Network:
    server = ControllerPort("kubeflow-system", tuple(sorted(MANAGER_LABELS.items())), trainer.STATUS_PORT)
    settings = NetworkSettings(status_server=server if status else None)
    policies = network_policies("nlp", "nlp", settings) + network_policies("vision", "vision", settings)
    namespaces = {"nlp": {"trainer-platform.io/team": "nlp"}, "vision": {"trainer-platform.io/team": "vision"}}
    return Network(policies, {**namespaces, "kubeflow-system": {}, "kube-system": {}})


CONTROLLER = Pod("kubeflow-system", {**MANAGER_LABELS, "app.kubernetes.io/part-of": "kubeflow"}, "10.244.0.7")
#: every port of the Trainer chart's manager Service and container but the status server's
CLOSED = (8443, 443, 9443, 8080, 8081)


@pytest.mark.parametrize("team", ["nlp", "vision"])
def test_training_pods_reach_the_status_server_port_only(team: str) -> None:
    net, job = _network(True), Pod(team, {JOBSET_NAME_LABEL: "llm"}, "10.244.1.5")
    assert net.connects(job, CONTROLLER, trainer.STATUS_PORT)
    for port in CLOSED:
        assert not net.connects(job, CONTROLLER, port), port
    # a pod of the namespace that is no job's (e.g. a notebook) gets nothing, nor another pod of the controller's
    assert not net.connects(Pod(team, {}), CONTROLLER, trainer.STATUS_PORT)
    other = Pod("kubeflow-system", {"app": "other"}, "10.244.0.8")
    assert not net.connects(job, other, trainer.STATUS_PORT)
    assert not _network(False).connects(job, CONTROLLER, trainer.STATUS_PORT)


# -- the stack setting -------------------------------------------------------------------------------


def _values(raw: Obj) -> Obj:
    v = validate(raw)
    release = v.releases.by_name["trainer"]
    return TRAINER.values(v.config, release)


def test_progress_is_on_by_default_and_can_be_turned_off() -> None:
    on = _values({"kubernetes": K8S})
    assert on["manager"]["config"]["featureGates"] == {trainer.STATUS_GATE: True}
    off = _values({"kubernetes": K8S, "components": {"trainer": {"progress": False}}})
    assert "config" not in off["manager"]


def test_progress_with_a_release_lacking_the_gate_names_the_releases_that_have_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    row = MATRIX.components["trainer"]
    old = row.release("2.2.1")
    assert old is not None
    releases = [r if r is not old else r.model_copy(update={"feature_gates": []}) for r in row.releases]
    monkeypatch.setitem(MATRIX.components, "trainer", row.model_copy(update={"releases": releases}))
    with pytest.raises(ConfigError) as info:
        validate({"kubernetes": K8S, "components": {"trainer": {"progress": True}}})
    (issue,) = [i for i in info.value.issues if i.path == "components.trainer.progress"]
    assert issue.found == "Trainer 2.2.1" and "TrainJobStatus" in issue.message
    assert issue.hint is not None and "2.3.0" in issue.hint and "2.2.0" in issue.hint
    # by default, such a release simply runs without progress
    v = validate({"kubernetes": K8S})
    assert "config" not in TRAINER.values(v.config, v.releases.by_name["trainer"])["manager"]
    assert resolve_releases(v.config, "1.34", True).by_name["trainer"].feature_gates == ()


def test_the_gate_itself_is_set_through_progress() -> None:
    with pytest.raises(ConfigError) as info:
        validate({"kubernetes": K8S, "components": {"trainer": {"featureGates": {trainer.STATUS_GATE: True}}}})
    (issue,) = info.value.issues
    assert issue.path == "components.trainer.featureGates.TrainJobStatus"
    assert issue.hint == "set components.trainer.progress: true instead"
