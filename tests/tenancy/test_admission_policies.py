"""A team member is hostile: the tenancy admission policies refuse each attack they can make through what they
submit, with a message, and let the catalog, the SDK's TrainJobs and the controllers through. CEL evaluated here;
the e2e suite proves it in an API server."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.crds import crds_dir
from tests.tenancy import cel_admission
from trainer_infra.admission.model import AdmissionSettings, TeamAdmission
from trainer_infra.manifests.pod_rules import SAFE_VOLUME_KINDS, UNSAFE_VOLUME_KINDS, pod_spec_problems
from trainer_infra.storage.injection import VOLUME as CLAIM_VOLUME
from trainer_infra.tenancy.admission.policy import admission_objects, namespace_annotations, policy_name

KUEUE = "system:serviceaccount:kueue-system:kueue-controller-manager"
TRAINER = "system:serviceaccount:kubeflow-system:trainer-kubeflow-trainer-controller-manager"
CACHE_SA = "kubeflow-trainer-cache-initializer"
SETTINGS = AdmissionSettings(
    teams=(
        TeamAdmission("nlp", claims=("workspace",), queues=("default",)),
        TeamAdmission("vision", claims=("workspace",), queues=("vision-q",), service_accounts=("notebook",)),
    ),
    trainer_identity=TRAINER,
    kueue_identity=KUEUE,
    priority_classes=("training-high",),
    data_cache_service_account=CACHE_SA,
)
Obj = dict[str, Any]
#: the team namespaces as rendered: their annotations carry the allow-lists the policies read
NAMESPACES = {t.namespace: namespace_annotations(t) for t in SETTINGS.teams}

ROOT = Path(__file__).resolve().parents[2]


def refusals(policy: Obj, obj: Obj, *, namespace: str, **request: Any) -> list[str]:
    """The policy's refusals for a request in ``namespace`` (a team namespace above, or one without annotations)."""
    return cel_admission.refusals(
        policy, obj, namespace=namespace, namespace_annotations=NAMESPACES.get(namespace, {}), **request
    )


@pytest.fixture(scope="module")
def policies() -> dict[str, Obj]:
    objs = admission_objects(SETTINGS)
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"}


def policy(policies: dict[str, Obj], kind: str) -> Obj:
    return policies[policy_name(kind)]


def trainjob(ns: str = "nlp", queue: str | None = "default", pod: Obj | None = None, job: str = "node") -> Obj:
    obj: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue} if queue else {}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    if pod is not None:
        patch = {"replicatedJobs": [{"name": job, "template": {"spec": {"template": {"spec": pod}}}}]}
        obj["spec"]["runtimePatches"] = [
            {"manager": "example.com/me", "trainingRuntimeSpec": {"template": {"spec": patch}}}
        ]
    return obj


def runtime(pod: Obj, ns: str = "vision", claim_templates: list[Obj] | None = None) -> Obj:
    spec: Obj = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
    if claim_templates is not None:
        spec["volumeClaimPolicies"] = [{"templates": claim_templates}]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "rt", "namespace": ns},
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": spec}},
    }


CONTAINER = {"name": "node", "image": "pytorch/pytorch:2.10.0"}


# -- attack 1: another team's data through an inline volume ------------------------------------------


def test_attack1_inline_nfs_volume_in_runtime_patches_is_refused(policies: dict[str, Obj]) -> None:
    pod = {
        "volumes": [{"name": "all", "nfs": {"server": "nfs.storage", "path": "/"}}],
        "containers": [{"name": "node", "volumeMounts": [{"name": "all", "mountPath": "/all"}]}],
        "securityContext": {"runAsUser": 0},
    }
    (message,) = refusals(policy(policies, "TrainJob"), trainjob(pod=pod), namespace="nlp")
    assert message.startswith("TrainJob tj refused: mounts a volume of a kind")
    assert "your team's claims (workspace)" in message


@pytest.mark.parametrize("kind", ["csi", "hostPath", "iscsi", "ephemeral", "image"])
def test_attack1_every_unsafe_volume_kind_is_refused_in_patches_runtimes_jobsets_and_pods(
    policies: dict[str, Obj], kind: str
) -> None:
    pod = {"volumes": [{"name": "x", kind: {}}], "containers": [CONTAINER]}
    assert refusals(policy(policies, "TrainJob"), trainjob(pod=pod), namespace="nlp")
    assert refusals(policy(policies, "TrainingRuntime"), runtime(pod), namespace="vision")
    jobset = {"metadata": {"name": "js"}, "spec": runtime(pod)["spec"]["template"]["spec"]}
    assert refusals(policy(policies, "JobSet"), jobset, namespace="vision")
    assert refusals(policy(policies, "Pod"), {"metadata": {"name": "p"}, "spec": pod}, namespace="vision")


def test_attack1_honest_variant_team_claim_and_pod_local_volumes_pass(policies: dict[str, Obj]) -> None:
    """The claim through the runtime's own volume `initializer`: a patch volume of another name would be a second
    volume of the claim beside the runtime's, which the kubelet never mounts (refused, below)."""

    def pod(name: str) -> Obj:
        return {
            "volumes": [
                {"name": name, "persistentVolumeClaim": {"claimName": "workspace"}},
                {"name": "shm", "emptyDir": {"medium": "Memory"}},
            ],
            "containers": [{"name": "node", "volumeMounts": [{"name": name, "mountPath": "/data"}]}],
        }

    assert refusals(policy(policies, "TrainJob"), trainjob(pod=pod(CLAIM_VOLUME)), namespace="nlp") == []
    (message,) = refusals(policy(policies, "TrainJob"), trainjob(pod=pod("data")), namespace="nlp")
    assert f"the runtime already mounts your team's claim as the volume '{CLAIM_VOLUME}'" in message


def test_attack1_a_claim_that_is_not_the_teams_is_refused(policies: dict[str, Obj]) -> None:
    pod = {"volumes": [{"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": "someone-elses"}}]}
    (message,) = refusals(policy(policies, "TrainJob"), trainjob(pod=pod), namespace="nlp")
    assert "only workspace may be mounted" in message


# -- attack 2: no queue, no quota ------------------------------------------------------------------


@pytest.mark.parametrize("queue", [None, "default-typo"])
def test_attack2_trainjob_without_the_teams_queue_is_refused(policies: dict[str, Obj], queue: str | None) -> None:
    (message,) = refusals(policy(policies, "TrainJob"), trainjob("vision", queue=queue), namespace="vision")
    assert "kueue.x-k8s.io/queue-name to your team's queue (vision-q)" in message


def test_attack2_honest_variant_own_queue(policies: dict[str, Obj]) -> None:
    assert refusals(policy(policies, "TrainJob"), trainjob("vision", queue="vision-q"), namespace="vision") == []


# -- attack 3: lifting suspend ---------------------------------------------------------------------


def test_attack3_only_kueue_may_resume_a_suspended_trainjob(policies: dict[str, Obj]) -> None:
    old = trainjob()
    old["spec"]["suspend"] = True
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    tj = policy(policies, "TrainJob")
    (message,) = refusals(tj, new, old=old, namespace="nlp")
    assert "only the queue (Kueue) may resume" in message
    assert refusals(tj, new, old=old, namespace="nlp", user=KUEUE) == []
    # suspending again (Kueue preempting) and unrelated updates stay allowed
    assert refusals(tj, old, old=new, namespace="nlp") == []


def test_updates_that_change_neither_spec_nor_labels_are_not_judged_again(policies: dict[str, Obj]) -> None:
    """A TrainJob admitted before a rule existed stays deletable: its controller removes finalizers."""
    legacy = trainjob(queue=None)
    done = copy.deepcopy(legacy)
    done["metadata"]["finalizers"] = []
    assert refusals(policy(policies, "TrainJob"), done, old=legacy, namespace="nlp", user=TRAINER) == []
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "elsewhere"}
    assert refusals(policy(policies, "TrainJob"), relabelled, old=legacy, namespace="nlp", user=TRAINER)


def test_attack3_jobset_resume_only_by_trainer_or_kueue(policies: dict[str, Obj]) -> None:
    old: dict[str, Any] = {"metadata": {"name": "js"}, "spec": {"suspend": True, "replicatedJobs": []}}
    new = copy.deepcopy(old)
    new["spec"]["suspend"] = False
    js = policy(policies, "JobSet")
    assert refusals(js, new, old=old, namespace="nlp")
    assert refusals(js, new, old=old, namespace="nlp", user=TRAINER) == []


# -- attack 5: another service account ---------------------------------------------------------------


def test_attack5_runtime_patch_service_account_is_refused(policies: dict[str, Obj]) -> None:
    tj = trainjob(pod={"serviceAccountName": CACHE_SA})
    (message,) = refusals(policy(policies, "TrainJob"), tj, namespace="nlp")
    assert "service account that is not allowed for your jobs (allowed: default)" in message
    assert (
        refusals(
            policy(policies, "TrainJob"),
            trainjob("vision", "vision-q", {"serviceAccountName": "notebook"}),
            namespace="vision",
        )
        == []
    )


def test_attack5_deprecated_service_account_field_is_checked_too(policies: dict[str, Obj]) -> None:
    assert refusals(policy(policies, "TrainingRuntime"), runtime({"serviceAccount": CACHE_SA}), namespace="vision")


# -- attack 6: a member's TrainingRuntime -----------------------------------------------------------


def test_attack6_system_priority_class_is_refused(policies: dict[str, Obj]) -> None:
    (message,) = refusals(
        policy(policies, "TrainingRuntime"),
        runtime({"priorityClassName": "system-node-critical", "containers": [CONTAINER]}),
        namespace="vision",
    )
    assert "priorityClassName that is not one of the platform's" in message


def test_attack6_privileged_host_pid_host_path_runtime_is_refused(policies: dict[str, Obj]) -> None:
    pod = {
        "hostPID": True,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [{**CONTAINER, "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}],
    }
    messages = refusals(policy(policies, "TrainingRuntime"), runtime(pod), namespace="vision")
    assert len(messages) == 3, messages
    assert any("hostNetwork, hostPID or hostIPC" in m for m in messages)
    assert any("privileged container" in m for m in messages)


def test_attack6_claim_templates_may_not_bind_existing_volumes(policies: dict[str, Obj]) -> None:
    steal = [{"metadata": {"name": "initializer"}, "spec": {"volumeName": "pv-of-team-b"}}]
    assert refusals(policy(policies, "TrainingRuntime"), runtime({}, claim_templates=steal), namespace="vision")
    fresh = [{"metadata": {"name": "initializer"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    assert refusals(policy(policies, "TrainingRuntime"), runtime({}, claim_templates=fresh), namespace="vision") == []


def test_attack6_honest_runtime_and_allow_listed_priority_pass(policies: dict[str, Obj]) -> None:
    pod = {"priorityClassName": "training-high", "containers": [CONTAINER]}
    assert refusals(policy(policies, "TrainingRuntime"), runtime(pod), namespace="vision") == []


def test_a_labelled_namespace_that_is_no_team_is_refused(policies: dict[str, Obj]) -> None:
    messages = refusals(policy(policies, "Pod"), {"metadata": {"name": "p"}, "spec": {}}, namespace="elsewhere")
    assert "not a team of this platform" in messages[0]  # the first the API server reports


# -- the catalog and the controllers still pass ------------------------------------------------------


def catalog() -> list[Obj]:
    docs = [
        yaml.safe_load(p.read_text()) for p in sorted((ROOT / "runtimes").glob("*.yaml")) if not p.name.startswith("_")
    ]
    assert len(docs) >= 8
    return docs


@pytest.mark.parametrize("rt", catalog(), ids=lambda r: r["metadata"]["name"])
def test_every_catalog_runtime_passes_as_jobset_and_pods(policies: dict[str, Obj], rt: Obj) -> None:
    spec = rt["spec"]["template"]["spec"]
    jobset = {"metadata": {"name": "job"}, "spec": {**spec, "suspend": True}}
    assert refusals(policy(policies, "JobSet"), jobset, namespace="nlp") == []
    for job in spec["replicatedJobs"]:
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": f"job-{job['name']}-0",
            "uid": "u",
            "controller": True,
        }
        pod = {
            "metadata": {"name": "p", "ownerReferences": [owner]},
            "spec": job["template"]["spec"]["template"]["spec"],
        }
        assert refusals(policy(policies, "Pod"), pod, namespace="nlp") == []
        assert pod_spec_problems(pod["spec"]) == []


# -- the policies compile against the schemas they run on -------------------------------------------


def _volume_kinds(schema: Obj) -> set[str]:
    return set(schema["properties"]) - {"name"}


def _crd_spec(path: Path) -> Obj:
    doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    spec: Obj = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _pod_specs(spec: Obj, *path: str) -> Obj:
    for part in path:
        spec = spec["items"] if part == "[]" else spec["properties"][part]
    return spec


POD_IN_JOB = ("template", "spec", "template", "spec")


PATCH_POD = ("runtimePatches", "[]", "trainingRuntimeSpec", "template", "spec", "replicatedJobs", "[]", *POD_IN_JOB)
RUNTIME_POD = ("template", "spec", "replicatedJobs", "[]", *POD_IN_JOB)
SCHEMAS = [
    *[(f"trainer/{v}/trainer.kubeflow.org_trainjobs.yaml", PATCH_POD) for v in ("v2.2.1", "v2.3.0")],
    *[(f"trainer/{v}/trainer.kubeflow.org_trainingruntimes.yaml", RUNTIME_POD) for v in ("v2.2.1", "v2.3.0")],
    *[
        (f"jobset/{v}/jobset.x-k8s.io_jobsets.yaml", ("replicatedJobs", "[]", *POD_IN_JOB))
        for v in ("v0.11.1", "v0.12.0")
    ],
]


@pytest.mark.parametrize("crd,path", SCHEMAS)
def test_every_volume_kind_of_the_schemas_is_classified(crd: str, path: tuple[str, ...]) -> None:
    """A CEL `has()` on a field unknown to the schema does not compile; an unlisted new kind would slip through."""
    pod = _pod_specs(_crd_spec(crds_dir() / crd), *path)
    kinds = _volume_kinds(pod["properties"]["volumes"]["items"])
    assert kinds == set(SAFE_VOLUME_KINDS) | set(UNSAFE_VOLUME_KINDS)
    container_sc = pod["properties"]["containers"]["items"]["properties"]["securityContext"]["properties"]
    assert {"privileged", "capabilities", "windowsOptions"} <= set(container_sc)


def test_the_policies_do_not_grow_with_the_number_of_teams() -> None:
    """A map of every team in the CEL passed the API server's 100,000-character expression limit at ~590 teams
    (`make bench-pulumi` failed at 1,000): the allow-lists live on the namespaces instead."""
    many = AdmissionSettings(
        teams=tuple(TeamAdmission(f"team-{i:04d}", ("workspace",), ("default",)) for i in range(2000)),
        trainer_identity=TRAINER,
        kueue_identity=KUEUE,
        priority_classes=SETTINGS.priority_classes,
        data_cache_service_account=CACHE_SA,
    )
    assert admission_objects(many) == admission_objects(SETTINGS)
    longest = max(len(e) for o in admission_objects(many) for e in _expressions(o))
    assert longest < 10_000, longest


def _expressions(policy: Obj) -> list[str]:
    spec = policy["spec"]
    return [x["expression"] for part in ("variables", "validations", "matchConditions") for x in spec.get(part, [])]


def test_a_labelled_namespace_without_allow_lists_admits_nothing(policies: dict[str, Obj]) -> None:
    """A team label on a namespace the platform did not annotate (an admin's mistake) opens nothing."""
    found = cel_admission.refusals(
        policy(policies, "TrainJob"), trainjob(ns="stray"), namespace="stray", namespace_annotations={}
    )
    assert any("not a team of this platform" in f for f in found), found
    assert any("queue" in f for f in found), found
