"""Issue #27's attacks (no confused deputy), each run on the sandbox's real API server and controllers with the
`local` render applied: as a team member (member certificates) through a TrainJob, and as the data cache
initializer's ServiceAccount (what code running in its pod could do). Each is refused with a message naming
the field and the rule; nothing is created, no quota is held, another team's admitted job stays admitted; the
honest variants pass (the honest cache job runs in test_data_cache_runtime.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.cache_initializer import cache_objects
from tests.deputy_attacks import ENV_ATTACKS, GPU_ENV, PATCH_ATTACKS, PSS_ATTACKS
from tests.e2e.member_requests import member, nothing_left, patched, refused, small
from tests.e2e.platform import TJ, Obj, Platform, Team, has_condition, trainjob, unique, wait_admitted, workload_of
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient

pytestmark = pytest.mark.e2e

CACHE_RUNTIME = "torch-distributed-with-cache"
CACHE_SA = "kubeflow-trainer-cache-initializer"
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")


def cache_job(name: str, team: Team, env: list[Obj] | None = None, **dataset: Any) -> Obj:
    job = trainjob(name, team.namespace, gpus=1, nodes=1, runtime=CACHE_RUNTIME, queue=team.queue, cpu="1")
    job["spec"]["initializer"] = {"dataset": {"storageUri": "cache://sales/orders", **dataset}}
    if env is not None:
        job["spec"]["initializer"]["dataset"]["env"] = env
    return job


def pinned(platform: Platform) -> dict[str, str]:
    rt = next(r for r in platform.runtimes() if r["metadata"]["name"] == CACHE_RUNTIME)
    job = next(j for j in rt["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "dataset-initializer")
    (c,) = job["template"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in c["env"] if "value" in e}


def initializer_patch(job: Obj, job_patch: Obj, name: str = "dataset-initializer") -> Obj:
    out = copy.deepcopy(job)
    out["spec"]["runtimePatches"] = [
        {
            "manager": "example.com/member",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": name, **job_patch}]}}},
        }
    ]
    return out


@contextmanager
def bystander_job(sandbox: Sandbox, platform: Platform) -> Iterator[tuple[Team, str]]:
    """Another team's admitted job: no attack may disturb it (preempt, evict, take its quota)."""
    other = platform.teams()[0]
    name = unique("bystander")
    member(sandbox, other).create(small(name, other))
    try:
        wait_admitted(sandbox.client, other.namespace, name, 90)
        yield other, name
    finally:
        sandbox.client.delete(*TJ, name, other.namespace)


@pytest.fixture(scope="module")
def bystander(sandbox: Sandbox, platform: Platform) -> Iterator[tuple[Team, str]]:
    with bystander_job(sandbox, platform) as job:
        yield job


def still_admitted(sandbox: Sandbox, bystander: tuple[Team, str]) -> None:
    team, name = bystander
    wl = workload_of(sandbox.client, team.namespace, name)
    assert wl is not None and has_condition(wl, "Admitted") and not has_condition(wl, "Evicted"), wl


def attacker(platform: Platform) -> Team:
    return next(t for t in platform.teams() if t.queue != "default")


# -- 1. member input into the cache initializer ---------------------------------------------------------


def test_member_env_into_the_cache_initializer_is_refused(
    sandbox: Sandbox, platform: Platform, bystander: tuple[Team, str]
) -> None:
    team = attacker(platform)
    me = member(sandbox, team)
    for attack, (env, needle) in ENV_ATTACKS.items():
        name = unique("cacheenv")
        message = refused(me, cache_job(name, team, env), f"TrainJob {name} refused: ", needle)
        assert "spec.initializer" in message, (attack, message)
        nothing_left(sandbox.client, team.namespace, name)
    # the model initializer too (same rule: it runs the platform's image)
    job = small(unique("modelenv"), team)
    job["spec"]["initializer"] = {"model": {"storageUri": "hf://x/y", "env": [{"name": "LD_PRELOAD", "value": "/x"}]}}
    refused(me, job, "spec.initializer")
    # another scheme on the cache runtime, or a Secret's variables, would change what the initializer runs
    refused(me, cache_job(unique("scheme"), team, storageUri="s3://bucket/x"), "cache://")
    refused(me, cache_job(unique("secret"), team, secretRef={"name": "wandb"}), "secretRef")
    # honest: the SDK's DataCacheInitializer (CLUSTER_SIZE = the platform's size, METADATA_LOC), and data settings
    values = pinned(platform)
    honest = [
        {"name": "CLUSTER_SIZE", "value": values["CLUSTER_SIZE"]},
        {"name": "METADATA_LOC", "value": "s3://bucket/m.json"},
        {"name": "WORKER_MEM", "value": values["WORKER_MEM"]},
    ]
    me.create(cache_job(unique("honest"), team, honest), dry_run=True)
    still_admitted(sandbox, bystander)


# -- 2. runtime patches that move a member into the deputy's job ------------------------------------------


def test_runtime_patches_into_the_initializers_are_refused(
    sandbox: Sandbox, platform: Platform, bystander: tuple[Team, str]
) -> None:
    team = attacker(platform)
    me = member(sandbox, team)
    for job_patch, needle in PATCH_ATTACKS.values():
        name = unique("patch")
        image = {"image": "docker.io/evil/miner:1", "command": ["sh", "-c", "steal"]}
        job = cache_job(name, team)
        job["spec"]["trainer"].update(image)
        refused(me, initializer_patch(job, job_patch), f"TrainJob {name} refused: ", needle)
        nothing_left(sandbox.client, team.namespace, name)
    # controller labels anywhere in a patch (the JobSet template, any job, any pod template)
    for where in ("jobset", "job", "pod"):
        name = unique("label")
        job = patched(small(name, team), {})
        label = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}}
        spec = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
        rj = spec["spec"]["replicatedJobs"][0]
        {"jobset": spec, "job": rj["template"], "pod": rj["template"]["spec"]["template"]}[where]["metadata"] = label
        refused(me, job, "trainer.kubeflow.org")
        nothing_left(sandbox.client, team.namespace, name)
    # honest: scheduling of the initializer, and the trainer's own patches
    ok = initializer_patch(cache_job(unique("sched"), team), {"template": {"spec": {"template": {"spec": {}}}}})
    ok["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["spec"] = {"nodeSelector": {"trainer-platform.io/node-pool": "h100"}}
    me.create(ok, dry_run=True)
    still_admitted(sandbox, bystander)


# -- 3. GPUs not charged ------------------------------------------------------------------------------------


def test_gpu_selection_by_env_is_refused(sandbox: Sandbox, platform: Platform, bystander: tuple[Team, str]) -> None:
    team = attacker(platform)
    me = member(sandbox, team)
    for var in GPU_ENV:
        name = unique("gpu")
        job = trainjob(name, team.namespace, gpus=0, nodes=1, queue=team.queue, cpu="1")
        job["spec"]["trainer"]["env"] = [{"name": var, "value": "all"}]
        refused(me, job, "spec.trainer.env", "GPU")
        nothing_left(sandbox.client, team.namespace, name)
        patch = patched(
            small(unique("gpu"), team), {"containers": [{"name": "node", "env": [{"name": var, "value": "all"}]}]}
        )
        refused(me, patch, "GPU")
    # the device-list mounts the toolkit reads with deviceListStrategy: volume-mounts
    mount = {"name": "node", "volumeMounts": [{"name": "e", "mountPath": "/var/run/nvidia-container-devices/all"}]}
    refused(
        me,
        patched(small(unique("gpumount"), team), {"volumes": [{"name": "e", "emptyDir": {}}], "containers": [mount]}),
        "nvidia-container-devices",
    )
    # honest: CUDA_VISIBLE_DEVICES only narrows what the pod was given
    job = small(unique("cuda"), team)
    job["spec"]["trainer"]["env"] = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    me.create(job, dry_run=True)
    still_admitted(sandbox, bystander)


# -- 4. Pod Security at submit ------------------------------------------------------------------------------


def test_pods_pod_security_would_refuse_are_refused_at_submit(
    sandbox: Sandbox, platform: Platform, bystander: tuple[Team, str]
) -> None:
    team = attacker(platform)
    me = member(sandbox, team)
    for attack, (pod, needle) in PSS_ATTACKS.items():
        name = unique("pss")
        message = refused(me, patched(small(name, team), pod), f"TrainJob {name} refused: ", needle)
        if attack != "windows host process":
            assert 'PodSecurity "baseline:latest"' in message, message
        nothing_left(sandbox.client, team.namespace, name)
    # the AppArmor annotation of a pod template
    job = patched(small(unique("aa"), team), {})
    pod_template = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"
    ]["spec"]["template"]
    pod_template["metadata"] = {"annotations": {"container.apparmor.security.beta.kubernetes.io/node": "unconfined"}}
    refused(me, job, "AppArmor")
    # honest: what baseline admits
    ok = patched(small(unique("rtdefault"), team), {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}})
    me.create(ok, dry_run=True)
    still_admitted(sandbox, bystander)


# -- 5. the cache initializer's ServiceAccount, bounded at its own admission --------------------------------


def as_cache_initializer(sandbox: Sandbox, ns: str) -> KubeClient:
    return sandbox.client.impersonating(
        f"system:serviceaccount:{ns}:{CACHE_SA}", ("system:serviceaccounts", f"system:serviceaccounts:{ns}")
    )


Change = Callable[[Obj], Any]


def _templates(lws: Obj) -> list[Obj]:
    t = lws["spec"]["leaderWorkerTemplate"]
    return [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]


def _each(change: Callable[[Obj], Any]) -> Change:
    return lambda lws: [change(p) for p in _templates(lws)]


LWS_ATTACKS: dict[str, Change] = {
    "GPUs": _each(lambda p: p["containers"][0]["resources"]["limits"].__setitem__("nvidia.com/gpu", "8")),
    "system priority": _each(lambda p: p.__setitem__("priorityClassName", "system-node-critical")),
    "every toleration": _each(lambda p: p.__setitem__("tolerations", [{"operator": "Exists"}])),
    "another team's queue": lambda o: o["metadata"].__setitem__(
        "labels", {"kueue.x-k8s.io/queue-name": "vision-other"}
    ),
    "a bigger cluster": lambda o: o["spec"]["leaderWorkerTemplate"].__setitem__("size", 32),
    "no owning TrainJob": lambda o: o["metadata"].pop("ownerReferences"),
    "another image": _each(lambda p: p["containers"][0].__setitem__("image", "docker.io/evil/miner:1")),
    "a host path": _each(lambda p: p.__setitem__("volumes", [{"name": "r", "hostPath": {"path": "/"}}])),
    "its own account": _each(lambda p: p.__setitem__("serviceAccountName", CACHE_SA)),
}


def test_the_cache_initializer_creates_only_what_cache_py_creates(
    sandbox: Sandbox, platform: Platform, bystander: tuple[Team, str]
) -> None:
    team = attacker(platform)
    ns, admin = team.namespace, sandbox.client
    deputy = as_cache_initializer(sandbox, ns)
    name = unique("owner")
    member(sandbox, team).create(cache_job(name, team))
    owner = admin.get(*TJ, name, ns)
    try:
        env = {**pinned(platform), "STORAGE_URI": "cache://sales/orders", "METADATA_LOC": "s3://b/m.json"}
        account, cluster, service = cache_objects(owner, env)
        for change in LWS_ATTACKS.values():
            evil = copy.deepcopy(cluster)
            change(evil)
            refused(deputy, evil, "LeaderWorkerSet ")
        assert [o for o in admin.list(*LWS, ns) if o["metadata"]["name"] == cluster["metadata"]["name"]] == []
        for spec in (
            {"externalIPs": ["10.0.0.1"]},
            {"type": "LoadBalancer"},
            {"type": "NodePort"},
            {"type": "ExternalName", "externalName": "evil.example.com"},
        ):
            evil = copy.deepcopy(service)
            evil["spec"].update(spec)
            refused(deputy, evil, "Service ")
        evil = copy.deepcopy(account)
        evil["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] = "arn:aws:iam::1:role/admin"
        refused(deputy, evil, "dataCache.cluster.iamRole")
        # its role deletes nothing and lists nothing: the namespace's accounts are not its to remove
        for verb, path in (
            ("DELETE", admin.path("v1", "ServiceAccount", ns, "default")),
            ("GET", admin.path("v1", "ServiceAccount", ns, None)),
        ):
            with pytest.raises(ApiError) as err:
                deputy.request(verb, path)
            assert err.value.status == 403, err.value.message
        # honest: exactly what cache.py creates
        deputy.create(account)
        created = deputy.create(cluster)
        deputy.create(service)
        assert "kueue.x-k8s.io/queue-name" not in created["metadata"].get("labels", {})  # Kueue's owner rule
        second = copy.deepcopy(cluster)  # one cache cluster per TrainJob
        second["metadata"]["name"] = unique("second") + "-cache"
        refused(deputy, second, "one cache cluster per TrainJob")
    finally:
        admin.delete(*TJ, name, ns)
    still_admitted(sandbox, bystander)


# -- 6. every pod of a team namespace, whoever creates it ----------------------------------------------------


def test_pods_outside_the_rules_are_refused_whoever_creates_them(sandbox: Sandbox, platform: Platform) -> None:
    """Even the cluster admin (standing in for any controller or deputy) cannot put a pod into a team namespace
    with a system priority, another account, outside the queue, or selecting GPUs by env."""
    team = attacker(platform)
    ns = team.namespace

    def pod(**spec: Any) -> Obj:
        labels = spec.pop("labels", {"kueue.x-k8s.io/queue-name": team.queue})
        body = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}], **spec}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": unique("pod"), "namespace": ns, "labels": labels},
            "spec": body,
        }

    refused(sandbox.client, pod(priorityClassName="system-node-critical"), "priorityClassName")
    intruder = unique("intruder")
    account: Obj = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": intruder, "namespace": ns}}
    sandbox.client.create(account)  # exists (else the API server's ServiceAccount admission refuses first)
    try:
        refused(sandbox.client, pod(serviceAccountName=intruder), "service account that is not")
    finally:
        sandbox.client.delete("v1", "ServiceAccount", intruder, ns)
    refused(sandbox.client, pod(serviceAccountName=CACHE_SA), "pinned image")  # the deputy runs only its image
    # a label-less pod gets Kueue's `default` queue (the team's ClusterQueue): another queue is refused
    refused(sandbox.client, pod(labels={"kueue.x-k8s.io/queue-name": "elsewhere"}), "queue")
    env = [
        {
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        }
    ]
    refused(sandbox.client, pod(containers=env), "GPU")
    # honest: a queued pod of the team (what Kueue's pod integration admits)
    sandbox.client.create(pod(), dry_run=True)


#: The member's own attacks (classes 1, 2, 4 and 5), run again on what `pulumi up` installed (test_pulumi.py).
MEMBER_ATTACKS = (
    test_member_env_into_the_cache_initializer_is_refused,
    test_runtime_patches_into_the_initializers_are_refused,
    test_gpu_selection_by_env_is_refused,
    test_pods_pod_security_would_refuse_are_refused_at_submit,
)
