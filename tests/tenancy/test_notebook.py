"""The team notebook (`teams[].notebook`): the platform's one pod per team that reaches the API server with a token
of the members' rights. A hostile member must not get its label (the NetworkPolicies' key to the API server) onto a
job's pod, nor run a job as its ServiceAccount; the notebook's own pod is admitted, `restricted`, and reaches the API
server's endpoints only."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.helpers import plan_of, stack_raw
from tests.tenancy import cel_admission
from tests.tenancy.netpol_eval import External, Network, Pod
from trainer_infra.core.errors import ConfigError
from trainer_infra.manifests.pod_rules import pod_spec_problems
from trainer_infra.manifests.pod_security_standards import restricted_problems
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import policy_name
from trainer_infra.tenancy.notebook import NOTEBOOK, NOTEBOOK_LABEL

Obj = dict[str, Any]
IMAGE = "ghcr.io/example/notebook:1.0"
API = {"cidrs": ["10.0.0.2/32"], "port": 6443}


def _raw(api_server: Obj | None = API, notebook: Obj | None = None) -> Obj:
    raw = stack_raw("local")
    raw["teams"][0]["notebook"] = notebook or {"image": IMAGE}
    if api_server is not None:
        raw.setdefault("tenancy", {})["networkPolicies"] = {"apiServer": api_server}
    return raw


@pytest.fixture(scope="module")
def manifests() -> list[Obj]:
    return [o.manifest for o in plan_of(_raw()).objects]


def _one(manifests: list[Obj], kind: str, name: str, namespace: str | None = None) -> Obj:
    (found,) = [
        m
        for m in manifests
        if m["kind"] == kind and m["metadata"]["name"] == name and m["metadata"].get("namespace") == namespace
    ]
    return found


def _refusals(manifests: list[Obj], kind: str, obj: Obj) -> list[str]:
    policy = _one(manifests, "ValidatingAdmissionPolicy", policy_name(kind))
    ns = _one(manifests, "Namespace", "nlp")
    return cel_admission.refusals(
        policy, obj, namespace="nlp", namespace_annotations=ns["metadata"]["annotations"], namespace_labels={}
    )


def _notebook_pod(manifests: list[Obj]) -> Obj:
    """The notebook's pod as the ReplicaSet controller creates it from the rendered Deployment."""
    template = copy.deepcopy(_one(manifests, "Deployment", NOTEBOOK, "nlp")["spec"]["template"])
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{NOTEBOOK}-7d9f", "uid": "1", "controller": True}
    template["metadata"].update(name=f"{NOTEBOOK}-7d9f-x2", ownerReferences=[owner])
    template["spec"]["serviceAccount"] = NOTEBOOK  # the API server's defaulting copies it
    pod: Obj = template
    return pod


def _job_pod(spec: Obj, labels: Obj | None = None) -> Obj:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "mnist-node-0", "uid": "1", "controller": True}
    meta = {"name": "mnist-node-0-0", "labels": {JOBSET_NAME_LABEL: "mnist", **(labels or {})}}
    return {"metadata": {**meta, "ownerReferences": [owner]}, "spec": spec}


def _spec(**extra: Any) -> Obj:
    container = {"name": "node", "image": "docker.io/library/python:3.12"}
    return {"containers": [container], **extra}


def _trainjob(patch_meta: Obj | None = None, pod_meta: Obj | None = None, spec: Obj | None = None) -> Obj:
    template: Obj = {"spec": {"template": {"spec": spec or _spec()}}}
    if pod_meta is not None:
        template["spec"]["template"]["metadata"] = pod_meta
    if patch_meta is not None:
        template["metadata"] = patch_meta
    runtime_spec = {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": template}]}}}
    return {
        "metadata": {"name": "mnist", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "runtimePatches": [{"manager": "me", "trainingRuntimeSpec": runtime_spec}],
        },
    }


MARK = {NOTEBOOK_LABEL: "true"}
OURS = f"sets the label {NOTEBOOK_LABEL}"


# -- admission ---------------------------------------------------------------------------------------


def test_the_notebooks_own_pod_is_admitted_and_restricted(manifests: list[Obj]) -> None:
    pod = _notebook_pod(manifests)
    assert _refusals(manifests, "Pod", pod) == []
    assert restricted_problems(pod["spec"]) == []
    assert pod_spec_problems(pod["spec"], claims=["workspace"], service_accounts=[NOTEBOOK]) == []
    container = pod["spec"]["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 1000


def test_a_job_pod_with_the_notebook_label_is_refused_with_the_reason(manifests: list[Obj]) -> None:
    messages = _refusals(manifests, "Pod", _job_pod(_spec(), MARK))
    assert [m for m in messages if OURS in m and "reach the API server" in m], messages


def test_a_job_pod_as_the_notebooks_service_account_is_refused(manifests: list[Obj]) -> None:
    spec = _spec(serviceAccountName=NOTEBOOK, serviceAccount=NOTEBOOK)
    messages = _refusals(manifests, "Pod", _job_pod(spec))
    assert [m for m in messages if "service account that is not allowed" in m], messages
    # labelled too, still not the notebook's: no ReplicaSet of the notebook made it
    assert _refusals(manifests, "Pod", _job_pod(spec, MARK))


def test_only_the_notebooks_replica_set_makes_its_pod(manifests: list[Obj]) -> None:
    pod = _notebook_pod(manifests)
    pod["metadata"]["ownerReferences"][0]["name"] = "other-7d9f"
    assert _refusals(manifests, "Pod", pod)
    pod = _notebook_pod(manifests)
    pod["spec"]["serviceAccountName"] = pod["spec"]["serviceAccount"] = "default"
    assert [m for m in _refusals(manifests, "Pod", pod) if OURS in m]


@pytest.mark.parametrize("where", ["patch", "pod", "trainjob"])
def test_a_trainjob_cannot_carry_the_notebook_label(manifests: list[Obj], where: str) -> None:
    job = {
        "patch": _trainjob(patch_meta={"labels": MARK}),
        "pod": _trainjob(pod_meta={"labels": MARK}),
        "trainjob": _trainjob(),
    }[where]
    if where == "trainjob":
        job["metadata"]["labels"].update(MARK)
    messages = _refusals(manifests, "TrainJob", job)
    assert [m for m in messages if m.startswith("TrainJob mnist refused: " + OURS)], messages
    assert not [m for m in _refusals(manifests, "TrainJob", _trainjob(pod_meta={"labels": {"mine": "x"}})) if OURS in m]


def test_a_trainjob_cannot_run_as_the_notebooks_service_account(manifests: list[Obj]) -> None:
    messages = _refusals(manifests, "TrainJob", _trainjob(spec=_spec(serviceAccountName=NOTEBOOK)))
    assert [m for m in messages if "service account that is not allowed" in m], messages


def test_runtimes_and_jobsets_cannot_label_their_pods_as_the_notebook(manifests: list[Obj]) -> None:
    job: Obj = {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": MARK}, "spec": _spec()}}}}
    jobset = {"metadata": {"name": "mnist"}, "spec": {"replicatedJobs": [job]}}
    assert [m for m in _refusals(manifests, "JobSet", jobset) if OURS in m]
    runtime: Obj = {"metadata": {"name": "rt"}, "spec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    assert [m for m in _refusals(manifests, "TrainingRuntime", runtime) if OURS in m]
    clean = copy.deepcopy(runtime)
    del job["template"]["spec"]["template"]["metadata"]
    clean["spec"]["template"]["spec"]["replicatedJobs"] = [job]
    assert not [m for m in _refusals(manifests, "TrainingRuntime", clean) if OURS in m]


# -- RBAC: the members' rights, no more ------------------------------------------------------------------------


def test_the_notebooks_service_account_is_bound_exactly_like_the_members(manifests: list[Obj]) -> None:
    account = {"kind": "ServiceAccount", "name": NOTEBOOK, "namespace": "nlp"}
    user = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice@example.com"}
    bindings = [m for m in manifests if m["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    with_account = {m["metadata"]["name"] for m in bindings if account in m.get("subjects", [])}
    with_user = {m["metadata"]["name"] for m in bindings if user in m.get("subjects", [])}
    assert with_account == with_user and with_account


# -- network -----------------------------------------------------------------------------------------------------


def test_only_the_notebook_reaches_the_api_server_and_nothing_else_opens(manifests: list[Obj]) -> None:
    policies = [m for m in manifests if m["kind"] == "NetworkPolicy"]
    namespaces = {m["metadata"]["name"]: m["metadata"].get("labels", {}) for m in manifests if m["kind"] == "Namespace"}
    net = Network(policies, {**namespaces, "kube-system": {}})
    notebook = Pod("nlp", {NOTEBOOK_LABEL: "true", "trainer-platform.io/team": "nlp"}, "10.244.0.5")
    api = External("10.0.0.2")
    assert net.connects(notebook, api, 6443)
    assert not net.connects(notebook, api, 10250)  # the same address, another port (a kubelet's)
    assert not net.connects(notebook, External("10.0.0.3"), 6443)
    for job in (Pod("nlp", {JOBSET_NAME_LABEL: "mnist"}), Pod("vision", {NOTEBOOK_LABEL: "true"})):
        assert not net.connects(job, api, 6443)  # a job's pod; another team without a notebook
    assert not net.connects(notebook, Pod("vision", {JOBSET_NAME_LABEL: "x"}, "10.244.0.9"), 29500)
    assert not net.connects(notebook, Pod("nlp", {JOBSET_NAME_LABEL: "x"}, "10.244.0.9"), 29500)


# -- config ------------------------------------------------------------------------------------------------------


def test_a_notebook_needs_the_api_servers_endpoints() -> None:
    with pytest.raises(ConfigError) as info:
        validate(_raw(api_server=None))
    (issue,) = [i for i in info.value.issues if i.path == "teams[0].notebook"]
    assert "tenancy.networkPolicies.apiServer" in issue.message
    assert issue.hint is not None and "endpointslices" in issue.hint


def test_the_notebook_is_off_by_default_and_the_image_admitted_exactly(manifests: list[Obj]) -> None:
    assert not [o for o in plan_of(stack_raw("local")).objects if o.manifest["metadata"]["name"] == NOTEBOOK]
    pod = _notebook_pod(manifests)
    pod["spec"]["containers"][0]["image"] = "ghcr.io/example/notebook:2.0"  # local allows ghcr.io: still admitted
    assert _refusals(manifests, "Pod", pod) == []
    pod["spec"]["containers"][0]["image"] = "evil.example.com/notebook:1.0"
    assert [m for m in _refusals(manifests, "Pod", pod) if "image the platform does not allow" in m]


def test_the_team_quota_is_raised_by_the_notebook_and_the_file_service() -> None:
    """The notebook runs before any job: a job sized to the admin's ResourceQuota must still get every pod."""
    raw = _raw(notebook={"image": IMAGE, "cpu": "2", "memory": "8Gi"})
    raw["teams"][0]["resourceQuota"] = {
        "hard": {"requests.cpu": "32", "requests.memory": "128Gi", "limits.memory": "256Gi", "pods": "100"}
    }
    quota = _one([o.manifest for o in plan_of(raw).objects], "ResourceQuota", "trainer-platform-team", "nlp")
    assert quota["spec"]["hard"] == {
        "limits.memory": "270464Mi",  # 256Gi + the notebook's 8Gi + the file service's 128Mi
        "pods": "102",
        "requests.cpu": "34010m",  # 32 + 2 + 10m
        "requests.memory": "139296Mi",  # 128Gi + 8Gi + 32Mi
    }
