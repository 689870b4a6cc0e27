"""A hostile member hides a container where one reader does not look: in an init or ephemeral container list, a
LeaderWorkerSet's leader template, a TrainJob's runtimePatches. Every reader of containers walks them with
`manifests/pod_walk.py`; here a privileged container sits in every list of every pod spec of every kind the product
reads, and each reader must name every one of them (or, where it reads fewer lists, say which and why)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.conformance.crds import crds_dir
from tests.tenancy import cel_admission
from trainer_infra.admission.model import AdmissionSettings, TeamAdmission
from trainer_infra.manifests.pod_rules import PRIVILEGED, pod_spec_problems
from trainer_infra.manifests.pod_security_standards import restricted_problems
from trainer_infra.manifests.pod_walk import (
    CONTAINER_LISTS,
    EACH,
    POD_SPEC_PATHS,
    TEMPLATE_LISTS,
    all_containers,
    containers,
    pod_specs,
)
from trainer_infra.manifests.runtime import images_of
from trainer_infra.migrate import tenancy as migrate
from trainer_infra.policy_rules.model import Subject
from trainer_infra.policy_rules.rules import RULES as POLICY_RULES
from trainer_infra.tenancy.admission.kinds import KINDS
from trainer_infra.tenancy.admission.policy import admission_objects, namespace_annotations, policy_name

Obj = dict[str, Any]
#: every container list of the core PodSpec, written here rather than read from the walker it checks
EVERY_LIST = ("initContainers", "containers", "ephemeralContainers")
TEAM = TeamAdmission("vision", claims=("workspace",), queues=("q",))
SETTINGS = AdmissionSettings(teams=(TEAM,), trainer_identity="trainer", kueue_identity="kueue")


def _hostile(name: str) -> Obj:
    return {"name": name, "image": f"example.com/{name}:1.0", "securityContext": {"privileged": True}}


def _pod(tag: str, lists: tuple[str, ...] = EVERY_LIST) -> Obj:
    """A pod spec with one privileged container in each list, named `<tag>-<list>`, behind an honest one."""
    pod: Obj = {"containers": [{"name": f"{tag}-honest", "image": "example.com/train:1.0"}]}
    for field in lists:
        pod.setdefault(field, []).append(_hostile(f"{tag}-{field.lower()}"))
    return pod


def _put(obj: Obj, path: tuple[str, ...], pod: Obj) -> None:
    """`pod` at `path` (a `POD_SPEC_PATHS` entry) inside `obj`, creating the levels; `EACH`: a one-item list."""
    at: Any = obj
    for key, nxt in zip(path, (*path[1:], None), strict=True):
        level: Any = pod if nxt is None else [] if nxt == EACH else {}
        if key != EACH:
            at = at.setdefault(key, level)
        elif at:
            at = at[0]
        else:
            at.append(level)
            at = level


def _object(kind: str, lists: tuple[str, ...] = EVERY_LIST) -> tuple[Obj, set[str]]:
    """An object of `kind` with a hostile pod at each of its pod-spec paths, and the hostile containers' names."""
    obj: Obj = {"apiVersion": "example/v1", "kind": kind, "metadata": {"name": "x", "namespace": TEAM.namespace}}
    hostile = set()
    for n, path in enumerate(POD_SPEC_PATHS[kind]):
        pod = _pod(f"p{n}", lists)
        hostile |= {c["name"] for field in lists for c in pod[field] if c["name"] != f"p{n}-honest"}
        _put(obj, path, pod)
    return obj, hostile


def _pod_of(lists: tuple[str, ...] = EVERY_LIST) -> tuple[Obj, set[str]]:
    pod = _pod("p", lists)
    return pod, {c["name"] for field in lists for c in pod[field]} - {"p-honest"}


@pytest.mark.parametrize("kind", sorted(POD_SPEC_PATHS))
def test_the_walker_finds_every_container_of_every_shape(kind: str) -> None:
    obj, hostile = _object(kind)
    found = {c["name"]: path for path, c in all_containers(obj)}
    assert hostile <= set(found)
    assert len(hostile) == len(EVERY_LIST) * len(POD_SPEC_PATHS[kind])
    for name, path in found.items():  # each path leads back to its container
        at: Any = obj
        for part in path.replace("[", ".[").split("."):
            at = at[int(part[1:-1])] if part.startswith("[") else at[part]
        assert at["name"] == name


def test_every_kind_a_member_can_submit_has_its_pod_specs_walked() -> None:
    assert set(KINDS.names()) | {"LeaderWorkerSet", "ClusterTrainingRuntime"} <= set(POD_SPEC_PATHS)


def test_hostile_input_of_the_wrong_type_is_skipped_not_a_crash() -> None:
    pod: Obj = {"containers": ["node", None, {"name": "ok"}], "initContainers": {"name": "not a list"}}
    assert [w for w, _ in containers(pod)] == ["containers[2]"]
    assert list(pod_specs({"kind": "JobSet", "spec": {"replicatedJobs": "x"}})) == []
    assert list(pod_specs({"kind": "Pod", "spec": ["x"]})) == []


def test_the_offline_pod_rules_name_every_container() -> None:
    """The catalog loader and CrossGuard (`pod_spec_problems`)."""
    pod, hostile = _pod_of()
    problems = " ".join(pod_spec_problems(pod))
    assert all(f"[{name}]" in problems for name in hostile), problems


def test_the_pod_security_port_names_every_container() -> None:
    pod, hostile = _pod_of()
    problems = " ".join(restricted_problems(pod))
    assert all(f"container {name!r} is privileged" in problems for name in hostile), problems


def test_migrate_names_every_container_a_trainjob_can_carry() -> None:
    """A migrated job becomes a TrainJob, whose runtimePatches have no ephemeral containers (TEMPLATE_LISTS)."""
    pod, hostile = _pod_of(TEMPLATE_LISTS)
    ctx = migrate.Context("vision", "vision", "baseline:v1.34", claims=TEAM.claims)
    refused = {r.detail for r in migrate.refusals(pod, ctx) if r.reason == "privileged"}
    assert refused == {f'container "{n}" must not set securityContext.privileged=true' for n in hostile}


def test_every_image_of_a_runtime_is_judged() -> None:
    """`images_of` feeds the pins check and the image mirror: an image in any list counts."""
    runtime, hostile = _object("ClusterTrainingRuntime")
    assert {f"example.com/{n}:1.0" for n in hostile} <= set(images_of(runtime))


@pytest.mark.parametrize("kind", ["TrainingRuntime", "ClusterTrainingRuntime"])
def test_crossguard_names_every_container_of_a_runtime(kind: str) -> None:
    runtime, hostile = _object(kind)
    subject = Subject(f"kubernetes:trainer.kubeflow.org/v1alpha1:{kind}", "x", runtime)
    (rule,) = [r for r in POLICY_RULES if r.name == "runtimes-stay-off-the-node"]
    messages = " ".join(v.message for v in rule.check([subject]))
    assert all(f"[{name}]" in messages for name in hostile), messages


def _admission_policy(kind: str) -> Obj:
    (policy,) = [
        o
        for o in admission_objects(SETTINGS)
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == policy_name(kind)
    ]
    return policy


#: a TrainJob's runtimePatches have no ephemeral list (the schema test below proves it)
ADMITTED = [(k.name, f) for k in KINDS for f in EVERY_LIST if (k.name, f) != ("TrainJob", "ephemeralContainers")]


@pytest.mark.parametrize(("kind", "field"), ADMITTED, ids=[f"{k}-{f}" for k, f in ADMITTED])
def test_admission_refuses_a_privileged_container_in_every_list_of_every_kind(kind: str, field: str) -> None:
    obj, _ = _object(kind, (field,))
    if kind == "TrainJob":
        patch = obj["spec"]["runtimePatches"][0]
        patch["manager"] = "example.com/me"
        patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["name"] = "node"
        obj["spec"]["runtimeRef"] = {"name": "torch-distributed"}
        obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    refusals = cel_admission.refusals(
        _admission_policy(kind), obj, namespace=TEAM.namespace, namespace_annotations=namespace_annotations(TEAM)
    )
    assert any(PRIVILEGED.message[:40] in r for r in refusals), refusals
    honest = copy.deepcopy(obj)
    for _, c in all_containers(honest):
        c["securityContext"] = {}
    refusals = cel_admission.refusals(
        _admission_policy(kind), honest, namespace=TEAM.namespace, namespace_annotations=namespace_annotations(TEAM)
    )
    assert not any(PRIVILEGED.message[:40] in r for r in refusals), refusals


# -- the lists are those of the schemas the product runs on ---------------------------------------------------


def _pod_schema(crd: str, path: tuple[str, ...]) -> Obj:
    doc = yaml.safe_load((crds_dir() / crd).read_text())
    schema: Obj = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in path:
        schema = schema["items"] if part == EACH else schema["properties"][part]
    return schema


def _lists_of(schema: Obj) -> set[str]:
    return {k for k in schema["properties"] if k.lower().endswith("containers")}


SCHEMAS = [
    *[(f"trainer/{v}/trainer.kubeflow.org_trainjobs.yaml", "TrainJob") for v in ("v2.2.1", "v2.3.0")],
    *[(f"trainer/{v}/trainer.kubeflow.org_trainingruntimes.yaml", "TrainingRuntime") for v in ("v2.2.1", "v2.3.0")],
    *[
        (f"trainer/{v}/trainer.kubeflow.org_clustertrainingruntimes.yaml", "ClusterTrainingRuntime")
        for v in ("v2.2.1", "v2.3.0")
    ],
    *[(f"jobset/{v}/jobset.x-k8s.io_jobsets.yaml", "JobSet") for v in ("v0.11.1", "v0.12.0")],
]


@pytest.mark.parametrize(("crd", "kind"), SCHEMAS, ids=[c for c, _ in SCHEMAS])
def test_the_walker_knows_every_container_list_of_the_schemas(crd: str, kind: str) -> None:
    """A new container list in a future schema fails here until the walker reads it; a TrainJob's patches carry
    exactly the lists a pod is created with."""
    (path,) = POD_SPEC_PATHS[kind]
    lists = _lists_of(_pod_schema(crd, path))
    assert lists <= set(CONTAINER_LISTS) == set(EVERY_LIST)
    if kind == "TrainJob":
        assert lists == set(TEMPLATE_LISTS)
