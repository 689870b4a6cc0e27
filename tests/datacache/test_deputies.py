"""The deputy inventory holds against the render, and what the data cache's identities create is
bounded at its own admission (CEL evaluated here, the e2e suite runs the same policies in an API server)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.cache_initializer import cache_objects
from tests.deputy_attacks import ENV_ATTACKS, GPU_ENV, PATCH_ATTACKS, PSS_ATTACKS
from tests.helpers import render, stack_raw
from tests.tenancy import cel_admission
from trainer_infra.core.errors import ConfigError
from trainer_infra.datacache.deputies import bound_in_team_namespaces, inventory
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.datacache.rbac import CACHE_RULES
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import policy_name

Obj = dict[str, Any]
TEAM_LABEL = "trainer-platform.io/team"
CACHE_USER = f"system:serviceaccount:vision:{CACHE_INITIALIZER}"


@pytest.fixture(scope="module")
def manifests() -> list[Obj]:
    return render(stack_raw("local")).manifests


def of_kind(manifests: list[Obj], kind: str) -> list[Obj]:
    return [m for m in manifests if m["kind"] == kind]


def team_namespaces(manifests: list[Obj]) -> dict[str, dict[str, str]]:
    return {
        n["metadata"]["name"]: n["metadata"].get("annotations", {})
        for n in of_kind(manifests, "Namespace")
        if TEAM_LABEL in n["metadata"].get("labels", {})
    }


def test_every_service_account_bound_in_a_team_namespace_is_in_the_inventory_and_back(manifests: list[Obj]) -> None:
    raw = stack_raw("local")
    members = {
        (t.get("namespace", t["name"]), ref.rpartition("/")[2])
        for t in raw["teams"]
        for ref in t.get("members", {}).get("serviceAccounts", [])
    }
    deputies = bound_in_team_namespaces(data_cache=True)
    namespaces = team_namespaces(manifests)
    seen: dict[str, set[str]] = {}
    for rb in of_kind(manifests, "RoleBinding"):
        ns = rb["metadata"]["namespace"]
        if ns not in namespaces:
            continue
        for s in rb["subjects"]:
            if s["kind"] != "ServiceAccount" or (ns, s["name"]) in members:
                continue
            assert deputies.get(s["name"]) == rb["roleRef"]["name"], f"{ns}/{s['name']} is bound but not a deputy"
            seen.setdefault(s["name"], set()).add(ns)
    assert {sa: set(namespaces) for sa in deputies} == seen
    # what the inventory says it may do is what the render grants
    (role,) = [r for r in of_kind(manifests, "ClusterRole") if r["metadata"]["name"] == deputies[CACHE_INITIALIZER]]
    assert role["rules"] == [dict(r) for r in CACHE_RULES]
    for rule in role["rules"]:
        assert "delete" not in rule["verbs"] and "list" not in rule["verbs"], rule
    # without the data cache: no cache deputies, nothing bound
    off = copy.deepcopy(raw)
    off["dataCache"] = {"enabled": False}
    assert bound_in_team_namespaces(data_cache=False) == {}
    assert not [
        rb for rb in of_kind(render(off).manifests, "RoleBinding") if rb["roleRef"]["name"] in deputies.values()
    ]
    assert {d.identity for d in inventory(False)} < {d.identity for d in inventory(True)}


def _runtime_env(manifests: list[Obj]) -> dict[str, str]:
    (rt,) = [r for r in of_kind(manifests, "ClusterTrainingRuntime") if r["metadata"]["name"].endswith("-with-cache")]
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == CACHE_INITIALIZER
    return {e["name"]: e["value"] for e in pod["containers"][0]["env"] if "value" in e}


TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "cached", "namespace": "vision", "uid": "0000-1111"},
}


@pytest.fixture(scope="module")
def honest(manifests: list[Obj]) -> tuple[Obj, Obj, Obj]:
    env = {**_runtime_env(manifests), "STORAGE_URI": "cache://sales/orders", "METADATA_LOC": "s3://b/m.json"}
    sa, lws, svc = cache_objects(TRAINJOB, env)
    return sa, lws, svc


def _policies(manifests: list[Obj]) -> dict[str, Obj]:
    return {p["metadata"]["name"]: p for p in of_kind(manifests, "ValidatingAdmissionPolicy")}


def _refusals(manifests: list[Obj], kind: str, obj: Obj, user: str = CACHE_USER) -> list[str]:
    policy = _policies(manifests)[policy_name(kind)]
    annotations = team_namespaces(manifests)[obj["metadata"]["namespace"]]
    return cel_admission.refusals(policy, obj, namespace="vision", namespace_annotations=annotations, user=user)


def test_what_the_cache_initializer_creates_is_admitted(manifests: list[Obj], honest: tuple[Obj, Obj, Obj]) -> None:
    sa, lws, svc = honest
    assert _refusals(manifests, "ServiceAccount", sa) == []
    assert _refusals(manifests, "LeaderWorkerSet", lws) == []
    assert _refusals(manifests, "Service", svc) == []
    # one cache cluster per TrainJob: its own name and that TrainJob as controller; a team's queue if labelled
    assert _refusals(manifests, "LeaderWorkerSet", _changed(lws, lambda o: o["metadata"].pop("ownerReferences")))
    other = _changed(lws, lambda o: o["metadata"]["ownerReferences"][0].update(name="another"))
    assert any("one cache cluster per TrainJob" in m for m in _refusals(manifests, "LeaderWorkerSet", other))
    queued = _changed(lws, lambda o: o["metadata"].update(labels={"kueue.x-k8s.io/queue-name": "vision"}))
    assert _refusals(manifests, "LeaderWorkerSet", queued) == []
    elsewhere = _changed(lws, lambda o: o["metadata"].update(labels={"kueue.x-k8s.io/queue-name": "nlp"}))
    assert _refusals(manifests, "LeaderWorkerSet", elsewhere)


def _changed(obj: Obj, change: Any) -> Obj:
    out = copy.deepcopy(obj)
    change(out)
    return out


def _lws_pods(lws: Obj) -> list[Any]:  # Any: the attacks below set fields in comprehensions
    t = lws["spec"]["leaderWorkerTemplate"]
    return [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]


def _hidden_in(field: str) -> Callable[[Obj], Any]:
    """An attack that adds a privileged container to `field` of every pod template of a LeaderWorkerSet."""

    def attack(o: Obj) -> Any:
        hostile = {"name": "x", "image": "evil.io/x", "securityContext": {"privileged": True}}
        return [p.setdefault(field, []).append(dict(hostile)) for p in _lws_pods(o)]

    return attack


LWS_ATTACKS = {
    "another image": lambda o: [p["containers"][0].__setitem__("image", "evil.io/miner:1") for p in _lws_pods(o)],
    "a bigger cluster": lambda o: o["spec"]["leaderWorkerTemplate"].update({"size": 64}) or o,
    "more replicas": lambda o: o["spec"].update({"replicas": 5}) or o,
    "GPUs": lambda o: [
        p["containers"][0]["resources"]["limits"].__setitem__("nvidia.com/gpu", "8") for p in _lws_pods(o)
    ],
    "more memory": lambda o: [
        p["containers"][0]["resources"][k].__setitem__("memory", "512Gi")
        for p in _lws_pods(o)
        for k in ("limits", "requests")
    ],
    "no owner": lambda o: o["metadata"].pop("ownerReferences"),
    "another team's queue": lambda o: o["metadata"].update(labels={"kueue.x-k8s.io/queue-name": "nlp-q"}) or o,
    "a system priority": lambda o: [p.__setitem__("priorityClassName", "system-node-critical") for p in _lws_pods(o)],
    "every toleration": lambda o: [p.__setitem__("tolerations", [{"operator": "Exists"}]) for p in _lws_pods(o)],
    "a hostPath": lambda o: [
        p.__setitem__("volumes", [{"name": "r", "hostPath": {"path": "/"}}]) for p in _lws_pods(o)
    ],
    "another account": lambda o: [p.__setitem__("serviceAccountName", CACHE_INITIALIZER) for p in _lws_pods(o)],
    "a sidecar": lambda o: [p["containers"].append({"name": "x", "image": "evil.io/x"}) for p in _lws_pods(o)],
    "a command": lambda o: [p["containers"][0].__setitem__("command", ["sh", "-c", "id"]) for p in _lws_pods(o)],
    "PYTHONPATH": lambda o: [
        p["containers"][0]["env"].append({"name": "PYTHONPATH", "value": "/x"}) for p in _lws_pods(o)
    ],
    "GPU visibility": lambda o: [
        p["containers"][0]["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}) for p in _lws_pods(o)
    ],
    "privileged": lambda o: [
        p["containers"][0].__setitem__("securityContext", {"privileged": True}) for p in _lws_pods(o)
    ],
    "another name": lambda o: o["metadata"].update({"name": "miner"}) or o,
    # a container hidden in the lists cache.py never writes, in the leader's template and the workers'
    **{f"a privileged {field}": _hidden_in(field) for field in ("initContainers", "ephemeralContainers")},
}


@pytest.mark.parametrize("attack", sorted(LWS_ATTACKS))
def test_a_cache_cluster_unlike_cache_py_is_refused(
    manifests: list[Obj], honest: tuple[Obj, Obj, Obj], attack: str
) -> None:
    lws = _changed(honest[1], LWS_ATTACKS[attack])
    found = _refusals(manifests, "LeaderWorkerSet", lws)
    assert found, attack
    assert all(m.startswith("LeaderWorkerSet ") and " refused: " in m for m in found), found


SERVICE_ATTACKS = {
    "externalIPs": lambda o: o["spec"].update({"externalIPs": ["8.8.8.8"]}) or o,
    "LoadBalancer": lambda o: o["spec"].update({"type": "LoadBalancer"}) or o,
    "NodePort": lambda o: o["spec"].update({"type": "NodePort"}) or o,
    "ExternalName": lambda o: o["spec"].update({"type": "ExternalName", "externalName": "evil.io"}),
    "another selector": lambda o: o["spec"].update({"selector": {"jobset.sigs.k8s.io/jobset-name": "other"}}) or o,
    "another name": lambda o: o["metadata"].update({"name": "kubernetes"}) or o,
}


@pytest.mark.parametrize("attack", sorted(SERVICE_ATTACKS))
def test_a_service_unlike_cache_py_is_refused(manifests: list[Obj], honest: tuple[Obj, Obj, Obj], attack: str) -> None:
    found = _refusals(manifests, "Service", _changed(honest[2], SERVICE_ATTACKS[attack]))
    assert found, attack


def test_no_one_creates_external_services_in_team_namespaces(
    manifests: list[Obj], honest: tuple[Obj, Obj, Obj]
) -> None:
    """Whoever asks (a controller, an admin): ClusterIP only; headless Services (JobSet's) pass."""
    admin = "kubernetes-admin"
    external = _changed(honest[2], SERVICE_ATTACKS["externalIPs"])
    assert any("CVE-2020-8554" in m for m in _refusals(manifests, "Service", external, user=admin))
    headless = _changed(honest[2], lambda o: o.update({"metadata": {"name": "js", "namespace": "vision"}}))
    headless["spec"]["clusterIP"] = "None"
    assert _refusals(manifests, "Service", headless, user=admin) == []


SA_ATTACKS = {
    "another role": lambda o: o["metadata"]["annotations"].__setitem__(
        "eks.amazonaws.com/role-arn", "arn:aws:iam::1:role/admin"
    ),
    "another name": lambda o: o["metadata"].update({"name": "default"}) or o,
    "a token secret": lambda o: o.__setitem__("secrets", [{"name": "x"}]),
}


@pytest.mark.parametrize("attack", sorted(SA_ATTACKS))
def test_a_service_account_unlike_cache_py_is_refused(
    manifests: list[Obj], honest: tuple[Obj, Obj, Obj], attack: str
) -> None:
    found = _refusals(manifests, "ServiceAccount", _changed(honest[0], SA_ATTACKS[attack]))
    assert found and "dataCache.cluster.iamRole" in found[0], found
    # the platform (and the namespace's controllers) create their own accounts unjudged
    assert (
        _refusals(manifests, "ServiceAccount", _changed(honest[0], SA_ATTACKS[attack]), user="kubernetes-admin") == []
    )


# -- member input at TrainJob admission (the e2e sends the same attacks to the API server) --------------------


def _trainjob(runtime: str = "torch-distributed", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "vision", "labels": {"kueue.x-k8s.io/queue-name": "vision"}},
        "spec": {"runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime"}, **spec},
    }


def _cache_job(env: list[Obj] | None = None, **dataset: Any) -> Obj:
    ds: Obj = {"storageUri": "cache://sales/orders", **dataset}
    if env is not None:
        ds["env"] = env
    return _trainjob("torch-distributed-with-cache", initializer={"dataset": ds})


def _patch(job: Obj, name: str, job_patch: Obj) -> Obj:
    spec = {"replicatedJobs": [{"name": name, **job_patch}]}
    job["spec"]["runtimePatches"] = [{"manager": "example.com/me", "trainingRuntimeSpec": {"template": {"spec": spec}}}]
    return job


def _member(manifests: list[Obj], obj: Obj, kind: str = "TrainJob") -> list[str]:

    policy = _policies(manifests)[policy_name(kind)]
    annotations = team_namespaces(manifests)["vision"]
    labels = {"pod-security.kubernetes.io/enforce": "baseline"}
    return cel_admission.refusals(
        policy, obj, namespace="vision", namespace_annotations=annotations, namespace_labels=labels
    )


@pytest.mark.parametrize("attack", sorted(ENV_ATTACKS))
def test_member_env_into_the_cache_initializer_is_refused(manifests: list[Obj], attack: str) -> None:
    env, needle = ENV_ATTACKS[attack]
    found = _member(manifests, _cache_job(env))
    assert found and needle in found[0] and "spec.initializer" in found[0], found


def test_the_sdk_data_cache_initializer_and_data_settings_pass(manifests: list[Obj]) -> None:
    pinned = _runtime_env(manifests)
    env = [
        {"name": "CLUSTER_SIZE", "value": pinned["CLUSTER_SIZE"]},
        {"name": "METADATA_LOC", "value": "s3://b/m.json"},
        {"name": "WORKER_MEM", "value": pinned["WORKER_MEM"]},
    ]
    assert _member(manifests, _cache_job(env)) == []
    model = _trainjob(initializer={"model": {"storageUri": "hf://m", "env": [{"name": "ACCESS_TOKEN", "value": "x"}]}})
    assert _member(manifests, model) == []
    assert _member(manifests, _cache_job(storageUri="s3://b/x"))  # another scheme on the deputy's runtime
    assert _member(manifests, _cache_job(secretRef={"name": "wandb"}))
    # on every runtime: a Secret's keys would reach the initializer as env the allow-list never judged
    found = _member(
        manifests, _trainjob(initializer={"dataset": {"storageUri": "s3://b/x", "secretRef": {"name": "s"}}})
    )
    assert found and "set secretRef" in found[0], found


@pytest.mark.parametrize("attack", sorted(PATCH_ATTACKS))
def test_runtime_patches_into_the_initializer_are_refused(manifests: list[Obj], attack: str) -> None:
    job_patch, needle = PATCH_ATTACKS[attack]
    found = _member(manifests, _patch(_cache_job(), "dataset-initializer", copy.deepcopy(job_patch)))
    assert found and needle in found[0], found


def test_controller_labels_anywhere_in_a_patch_are_refused_and_scheduling_passes(manifests: list[Obj]) -> None:
    step = {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
    for where in ("job", "pod"):
        template: Obj = {"spec": {"template": {"spec": {}}}}
        (template if where == "job" else template["spec"]["template"])["metadata"] = {"labels": step}
        assert _member(manifests, _patch(_trainjob(), "node", {"template": template}))
    job = _patch(_trainjob(), "node", {"template": {"spec": {"template": {"spec": {}}}}})
    job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["metadata"] = {"labels": step}
    assert _member(manifests, job)
    topology = {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": "trainer-platform.io/rack"}}
    ok = _patch(_trainjob(), "node", {"template": {"spec": {"template": {"metadata": topology, "spec": {}}}}})
    assert _member(manifests, ok) == []
    sched = {"template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}, "tolerations": []}}}}}
    assert _member(manifests, _patch(_cache_job(), "dataset-initializer", sched)) == []


def _kueues_patch(job: Obj) -> Obj:
    """What Kueue writes when it admits `job` (RunWithPodSetsInfo): per podset, initializers included, its
    labels and annotations, the flavor's nodeSelector and tolerations, TAS scheduling gates."""
    info = {
        "metadata": {
            "labels": {"kueue.x-k8s.io/podset": "node"},
            "annotations": {"kueue.x-k8s.io/workload": "trainjob-tj-1a2b3"},
        },
        "spec": {
            "nodeSelector": {"trainer-platform.io/pool": "h100"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "schedulingGates": [{"name": "kueue.x-k8s.io/topology"}],
        },
    }
    jobs = [{"name": n, "template": {"spec": {"template": info}}} for n in ("dataset-initializer", "node")]
    spec = {"template": {"spec": {"replicatedJobs": jobs}}}
    job["spec"]["runtimePatches"] = [{"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": spec}]
    return job


def test_kueues_own_patch_passes_from_kueue_only(manifests: list[Obj]) -> None:
    """Kueue resumes an admitted TrainJob by writing its podset labels into its own runtime patch: refused, no
    job would ever start. The same patch under Kueue's manager name from anyone else is still judged."""
    kueue = "system:serviceaccount:kueue-system:kueue-controller-manager"
    policy = _policies(manifests)["trainer-platform-tenancy-trainjobs"]
    old = _kueues_patch(_cache_job())
    old["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"] = []
    old["spec"]["suspend"] = True
    resumed = _kueues_patch(_cache_job())
    for user, refused in ((kueue, False), ("alice@example.com", True)):
        found = cel_admission.refusals(
            policy,
            resumed,
            namespace="vision",
            old=old,
            user=user,
            namespace_annotations=team_namespaces(manifests)["vision"],
        )
        assert any("controllers own" in m for m in found) == refused, (user, found)
        assert refused or found == [], found
    assert any("controllers own" in m for m in _member(manifests, _kueues_patch(_cache_job())))


@pytest.mark.parametrize("var", GPU_ENV)
def test_gpu_selection_by_env_is_refused_everywhere(manifests: list[Obj], var: str) -> None:
    env = [{"name": var, "value": "all"}]
    assert "spec.trainer.env" in _member(manifests, _trainjob(trainer={"env": env}))[0]
    patch = {"template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "env": env}]}}}}}
    assert "GPU" in _member(manifests, _patch(_trainjob(), "node", patch))[0]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    pod = {
        "metadata": {"name": "p", "namespace": "vision", "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "c", "image": "i:1", "env": env}]},
    }
    assert any("GPU" in m for m in _member(manifests, pod, "Pod"))
    assert _member(manifests, _trainjob(trainer={"env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]})) == []


@pytest.mark.parametrize("attack", sorted(PSS_ATTACKS))
def test_pods_pod_security_would_refuse_are_refused_at_submit(manifests: list[Obj], attack: str) -> None:
    pod, needle = PSS_ATTACKS[attack]
    found = _member(manifests, _patch(_trainjob(), "node", {"template": {"spec": {"template": {"spec": pod}}}}))
    assert found and needle in found[0], found


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda r: r.setdefault("tenancy", {}).__setitem__("priorityClasses", ["system-node-critical"]), "tenancy"),
        (
            lambda r: r["teams"][0]["members"].__setitem__("serviceAccounts", [f"nlp/{CACHE_INITIALIZER}"]),
            "teams[0].members.serviceAccounts[0]",
        ),
    ],
)
def test_validate_refuses_a_data_cache_without_its_protections(change: Any, path: str) -> None:
    raw = stack_raw("local")
    change(raw)
    with pytest.raises(ConfigError) as err:
        validate(raw)
    assert any(i.path.startswith(path) for i in err.value.issues), [i.render() for i in err.value.issues]
    raw["dataCache"] = {"enabled": False}
    if path == "tenancy":  # without the data cache the same config is the operator's choice
        validate(raw)


def test_more_variants_are_refused(manifests: list[Obj], honest: tuple[Obj, Obj, Obj]) -> None:
    """Beyond the issue's list: a DRA claim, a runtime class, a device-list mount, a patch dropping no capability in
    a restricted namespace."""
    lws = _changed(honest[1], lambda o: [p.__setitem__("runtimeClassName", "nvidia") for p in _lws_pods(o)])
    assert _refusals(manifests, "LeaderWorkerSet", lws)
    lws = _changed(honest[1], lambda o: [p.__setitem__("resourceClaims", [{"name": "gpu"}]) for p in _lws_pods(o)])
    assert _refusals(manifests, "LeaderWorkerSet", lws)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    pod = {
        "metadata": {"name": "p", "namespace": "vision", "ownerReferences": [owner]},
        "spec": {"resourceClaims": [{"name": "gpu"}], "containers": [{"name": "c", "image": "i:1"}]},
    }
    assert any("resourceClaims" in m for m in _member(manifests, pod, "Pod"))
    mount = {"name": "node", "volumeMounts": [{"name": "e", "mountPath": "/var/run/nvidia-container-devices/all"}]}
    patch = {"template": {"spec": {"template": {"spec": {"containers": [mount]}}}}}
    assert any("nvidia-container-devices" in m for m in _member(manifests, _patch(_trainjob(), "node", patch)))
    drop = {"name": "node", "securityContext": {"capabilities": {"drop": ["NET_RAW"]}}}  # not ALL
    job = _patch(_trainjob(), "node", {"template": {"spec": {"template": {"spec": {"containers": [drop]}}}}})
    assert _member(manifests, job) == []  # baseline admits it
    policy = _policies(manifests)["trainer-platform-tenancy-trainjobs"]
    restricted = cel_admission.refusals(
        policy,
        job,
        namespace="vision",
        namespace_annotations=team_namespaces(manifests)["vision"],
        namespace_labels={"pod-security.kubernetes.io/enforce": "restricted"},
    )
    assert restricted and 'PodSecurity "restricted:latest"' in restricted[0], restricted


def test_the_cache_initializer_pod_as_the_controllers_create_it_is_admitted_and_nothing_else(
    manifests: list[Obj], honest: tuple[Obj, Obj, Obj]
) -> None:
    """The dataset-initializer pod of the cache runtime (what Trainer, JobSet and the Job controller make of it,
    with the API server's token volume) passes the Pod policy; the same account with another image does not;
    the cache cluster's pods run as their own account with the cache image only."""
    (rt,) = [r for r in of_kind(manifests, "ClusterTrainingRuntime") if r["metadata"]["name"].endswith("-with-cache")]
    spec = copy.deepcopy(rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"])
    spec["containers"][0]["env"].append({"name": "STORAGE_URI", "value": "cache://sales/orders"})
    for e in spec["containers"][0]["env"]:  # the API server drops an empty value (IAM_ROLE without a role)
        if e.get("value") == "":
            del e["value"]
    index = "metadata.labels['batch.kubernetes.io/job-completion-index']"  # the Job controller's (Indexed Job)
    spec["containers"][0]["env"].append(
        {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": index}}}
    )
    spec["volumes"].append(
        {
            "name": "kube-api-access-x",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {
                        "downwardAPI": {
                            "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                        }
                    },
                ]
            },
        }
    )
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
    pod = {"metadata": {"name": "p", "namespace": "vision", "ownerReferences": [owner]}, "spec": spec}
    assert _member(manifests, pod, "Pod") == []
    changes: list[Callable[[Any], None]] = [
        lambda s: s["containers"][0].update({"image": "docker.io/evil/miner:1"}),
        lambda s: s["containers"][0]["env"].append({"name": "PYTHONPATH", "value": "/x"}),
        lambda s: s["containers"][0]["env"][-1]["valueFrom"]["fieldRef"].update(fieldPath="metadata.annotations"),
        lambda s: s["containers"][0]["env"].append({"name": "CLUSTER_SIZE", "value": "64"}),
        lambda s: s["containers"].append({"name": "sidecar", "image": "docker.io/evil/miner:1"}),
        lambda s: s["volumes"].append(
            {"name": "d", "downwardAPI": {"items": [{"path": "a", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}
        ),
    ]
    for change in changes:
        evil = copy.deepcopy(pod)
        change(evil["spec"])
        assert any("pinned image" in m for m in _member(manifests, evil, "Pod")), evil
    # a cache cluster pod: its LeaderWorkerSet's template, as the StatefulSet controller creates it
    lws = honest[1]
    worker = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"])
    labels = {"leaderworkerset.sigs.k8s.io/name": lws["metadata"]["name"]}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "u", "controller": True}
    cache_pod = {"metadata": {"name": "c", "namespace": "vision", "labels": labels, "ownerReferences": [sts]}}
    cache_pod["spec"] = worker
    assert _member(manifests, cache_pod, "Pod") == []
    evil = copy.deepcopy(cache_pod)
    evil["spec"]["containers"][0]["image"] = "docker.io/evil/miner:1"
    assert _member(manifests, evil, "Pod")
    evil = copy.deepcopy(cache_pod)  # a StatefulSet's pod that is not the cache cluster's: not charged, refused
    evil["spec"]["serviceAccountName"] = "default"
    assert any("runs only as part of a job" in m for m in _member(manifests, evil, "Pod"))
