"""Issue #12's attacks, each run as a team member against the real API server and controllers of the sandbox
with the `local` render applied; each asserts the refusal and its message, and that the honest variant works.

Refusals come from the render's ValidatingAdmissionPolicies (and member RBAC); nothing is half-created:
no JobSet, no Workload. Attack 7 (config guard rails) is an offline check (unit tests) except `restricted`,
run here against the real PodSecurity admission; 9 (workflows) is a unit test;
attack 8 (NetworkPolicies) is applied here, enforced only by a CNI (tests/test_network_cluster.py, opt-in).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.e2e.member_requests import (
    RUNTIME,
    can,
    claim_patch,
    duration_seconds,
    member,
    member_runtime,
    nothing_left,
    patched,
    refused,
    small,
    team_claim,
)
from tests.e2e.platform import (
    CQ,
    GPU,
    TJ,
    Obj,
    Platform,
    Team,
    describe_namespace,
    gpu_quota,
    has_condition,
    jobset_pods,
    trainjob,
    unique,
    wait_admitted,
    workload_of,
)
from tests.helpers import stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.quantity import quantity
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.stack.validate import validate
from trainer_infra.storage.injection import VOLUME as CLAIM_VOLUME

pytestmark = pytest.mark.e2e

VAP = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy")
CACHE_SA = "kubeflow-trainer-cache-initializer"


# -- the policies are served and type-check clean ----------------------------------------------------


def test_admission_policies_compile_against_the_served_schemas(sandbox: Sandbox, platform: Platform) -> None:
    """The API server type-checks every expression against the installed CRDs: no warning may remain."""
    names = [p["metadata"]["name"] for p in platform.render.of_kind("ValidatingAdmissionPolicy")]
    assert len(names) >= 4, names

    def checked() -> list[Obj] | bool:
        stored = [sandbox.client.get(*VAP, n) for n in names]
        done = all(s.get("status", {}).get("observedGeneration") == s["metadata"]["generation"] for s in stored)
        return stored if done else False

    for policy in wait_for("the API server to type-check the admission policies", checked, 60):
        warnings = policy["status"].get("typeChecking", {}).get("expressionWarnings", [])
        assert warnings == [], (policy["metadata"]["name"], warnings)


# -- 1. another team's data -----------------------------------------------------------------------


def test_attack1_inline_nfs_volume_is_refused_and_the_team_claim_works(
    sandbox: Sandbox, platform: Platform, clean_teams: None
) -> None:
    team = platform.teams()[0]
    me, admin, ns = member(sandbox, team), sandbox.client, team.namespace
    mount = [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]
    steal = unique("steal")
    attack = patched(
        small(steal, team),
        {
            "volumes": [{"name": "data", "nfs": {"server": "nfs.trainer-platform-storage.svc", "path": "/"}}],
            "containers": mount,
            "securityContext": {"runAsUser": 0},
        },
    )
    refused(me, attack, f"TrainJob {steal} refused: mounts a volume of a kind", "nfs")
    nothing_left(admin, ns, steal)
    for kind in (
        {"csi": {"driver": "nfs.csi.k8s.io", "volumeAttributes": {"server": "x", "share": "/"}}},
        {"hostPath": {"path": "/"}},
    ):
        refused(me, patched(small(unique("steal"), team), {"volumes": [{"name": "data", **kind}], "containers": mount}))

    # honest: the team's own claim, mounted through the same mechanism, runs
    claim = team_claim(platform, team)
    honest = unique("claim")
    me.create(patched(small(honest, team), claim_patch(claim)))
    wait_admitted(admin, ns, honest, 90, " (team claim via runtimePatches)")

    def pod_with_claim() -> Obj | None:
        pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={honest}")
        return next((p for p in pods if p["status"].get("phase") == "Running"), None)

    try:
        pod = wait_for(f"a Running pod of {ns}/{honest}", pod_with_claim, 90)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
    claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [claim], "the patch merges into the runtime's claim volume: one volume of the claim"
    # the same claim as a volume of another name would be a second volume of it, which never mounts: refused
    second = claim_patch(claim)
    second["volumes"][0]["name"] = second["containers"][0]["volumeMounts"][0]["name"] = "data"
    refused(me, patched(small(unique("second"), team), second), f"as the volume '{CLAIM_VOLUME}'", "132921")


# -- 2. no queue, no quota ------------------------------------------------------------------------


def test_attack2_trainjob_outside_the_teams_queue_is_refused(sandbox: Sandbox, platform: Platform) -> None:
    """Kueue 0.19 puts a label-less job into a LocalQueue named `default` when the namespace has one
    (jobframework.ApplyDefaultLocalQueue...); a team whose queue has another name got no Workload at all."""
    team = next((t for t in platform.teams() if t.queue != "default"), None)
    assert team is not None, "the local render needs a team whose LocalQueue is not named `default`"
    me = member(sandbox, team)
    bare = small(unique("noqueue"), team)
    del bare["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    refused(me, bare, "kueue.x-k8s.io/queue-name", team.queue)
    nothing_left(sandbox.client, team.namespace, bare["metadata"]["name"])
    refused(me, trainjob(unique("elsewhere"), team.namespace, gpus=1, nodes=1, queue="default", cpu="1"), team.queue)
    # honest: the team's queue; and where the team's queue is `default`, Kueue fills in the label itself
    me.create(small(unique("queued"), team), dry_run=True)
    defaulted = next((t for t in platform.teams() if t.queue == "default"), None)
    if defaulted is not None:
        job = small(unique("defaulted"), defaulted)
        del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
        created = member(sandbox, defaulted).create(job, dry_run=True)
        assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"


# -- 3. lifting suspend -----------------------------------------------------------------------------


def test_attack3_nobody_but_kueue_resumes_a_suspended_trainjob(
    sandbox: Sandbox, platform: Platform, clean_teams: None
) -> None:
    team = platform.teams()[0]
    me, admin, ns = member(sandbox, team), sandbox.client, team.namespace
    cq = platform.cluster_queue(team)
    too_big = int(gpu_quota(cq)["nominalQuota"]) // platform.gpus_per_node() + 64  # never admissible
    name = unique("unsuspend")
    me.create(trainjob(name, ns, gpus=platform.gpus_per_node(), nodes=too_big, queue=team.queue, cpu="1"))
    wait_for(f"Kueue's Workload for {ns}/{name}", lambda: workload_of(admin, ns, name), 60)
    assert admin.get(*TJ, name, ns)["spec"].get("suspend") is True
    patch = {"spec": {"suspend": False}}
    path = admin.path(*TJ, ns, name)
    # the member has no update/patch on TrainJobs (the SDK never needs it) ...
    with pytest.raises(ApiError) as err:
        me.request("PATCH", path, patch, content_type="application/merge-patch+json")
    assert err.value.status == 403, err.value.message
    # ... and whoever has it (here: the cluster admin) is refused by the policy: only Kueue resumes.
    with pytest.raises(ApiError) as err:
        admin.request("PATCH", path, patch, content_type="application/merge-patch+json")
    assert "only the queue (Kueue) may resume" in err.value.message, err.value.message
    assert admin.get(*TJ, name, ns)["spec"].get("suspend") is True
    assert admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}") == []


# -- empty values Kueue's write-back would drop ------------------------------------------------------


def test_empty_values_kueue_would_drop_are_refused_at_submit(sandbox: Sandbox, platform: Platform) -> None:
    """Kueue 0.19 starts an admitted TrainJob by writing it back whole from its Go types, which drop empty values,
    and Trainer's CRD refuses that change of the immutable spec.trainer (kubeflow/trainer#3888): shown here with the
    same write by hand, in a namespace no policy judges. A member's job holding such a value is refused at submit,
    naming where; quantities need no rule, they are stored as Go writes them (Kueue's webhook, at create)."""
    team = platform.teams()[0]
    me, admin = member(sandbox, team), sandbox.client
    probe = unique("writeback")
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": probe}})
    try:
        job = trainjob(unique("dropped"), probe, gpus=1, nodes=1, cpu="1")
        job["metadata"]["labels"] = {}
        job["spec"]["suspend"] = True
        job["spec"]["trainer"]["env"] = []
        stored = admin.create(job)
        assert stored["spec"]["trainer"]["env"] == [], "the API server keeps an empty list"
        del stored["spec"]["trainer"]["env"]  # what Kueue's Update sends
        with pytest.raises(ApiError) as err:
            admin.request("PUT", admin.path(*TJ, probe, job["metadata"]["name"]), stored)
        assert err.value.status == 422 and "immutable" in err.value.message, err.value.message
        admin.delete(*TJ, job["metadata"]["name"], probe)
    finally:
        admin.delete("v1", "Namespace", probe)
    empty_env = small(unique("emptyenv"), team)
    empty_env["spec"]["trainer"]["env"] = []
    refused(me, empty_env, "spec.trainer holds an empty list", "leave the field out")
    nothing_left(admin, team.namespace, empty_env["metadata"]["name"])
    sdk_dataset = small(unique("emptyinit"), team)  # what the SDK sends for a dataset with no option set
    sdk_dataset["spec"]["initializer"] = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": []}}
    refused(me, sdk_dataset, "spec.initializer holds", "ignore_patterns")
    floats = small(unique("floats"), team)  # the SDK sends resources_per_node={"cpu": 1} as 1.0
    floats["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"] = 1.0
    stored = me.create(floats, dry_run=True)
    assert stored["spec"]["trainer"]["resourcesPerNode"]["requests"]["cpu"] == "1", stored["spec"]["trainer"]


# -- 4. quota held by a job whose pods never get ready ---------------------------------------------


def test_attack4_an_admitted_job_whose_pods_never_get_ready_gives_its_quota_back(
    sandbox: Sandbox, platform: Platform, local_settings: dict[str, Any], clean_teams: None
) -> None:
    """Kueue runs with the render's waitForPodsReady; pods refused by the namespace ResourceQuota never get
    ready, so Kueue evicts the Workload (PodsReadyTimeout) and the ClusterQueue's GPUs are free again."""
    ready = local_settings.get("waitForPodsReady")
    assert ready and ready.get("timeout"), f"render's Kueue config has no waitForPodsReady: {local_settings}"
    quotas = {q["metadata"]["namespace"]: q for q in platform.render.of_kind("ResourceQuota")}
    team = next(t for t in platform.teams() if t.namespace in quotas)
    # a quantity: the platform raises the admin's figure by its own pods' share (e.g. 32 → 32010m)
    cpu = quantity(str(quotas[team.namespace]["spec"]["hard"]["requests.cpu"]))
    admin, ns = sandbox.client, team.namespace
    name = unique("neverready")
    # two pods of more than half the namespace's ResourceQuota cpu: the queue's cpu quota is larger, so Kueue
    # admits; the API server refuses the second pod (exceeded quota) and the job never has all pods ready.
    member(sandbox, team).create(
        trainjob(name, ns, gpus=platform.gpus_per_node(), nodes=2, queue=team.queue, cpu=str(math.floor(cpu / 2) + 1))
    )
    wait_admitted(admin, ns, name, 90, " (before its pods are refused)")
    cq = platform.cluster_queue(team)["metadata"]["name"]

    def evicted() -> Obj | None:
        wl = workload_of(admin, ns, name)
        for c in (wl or {}).get("status", {}).get("conditions", []):
            if c["type"] == "Evicted" and c["status"] == "True":
                return dict(c)
        return None

    timeout = duration_seconds(str(ready["timeout"]))
    cond = wait_for(f"Kueue to evict {ns}/{name} after {ready['timeout']}", evicted, timeout + 60)
    assert cond["reason"] == "PodsReadyTimeout", cond
    # Kueue suspends the job, waits for its pods to go, then releases the reservation
    wait_for(
        f"{ns}/{name} to give its quota reservation back",
        lambda: not has_condition(workload_of(admin, ns, name) or {}, "QuotaReserved"),
        60,
    )

    def free() -> bool:
        for flavor in admin.get(*CQ, cq).get("status", {}).get("flavorsReservation", []):
            for res in flavor["resources"]:
                if res["name"] == GPU and int(res.get("total", 0)) != 0:
                    return False
        return True

    wait_for(f"ClusterQueue {cq} to hold no GPUs", free, 30)


# -- 5. another service account -------------------------------------------------------------------


def test_attack5_service_account_in_runtime_patches_is_refused(sandbox: Sandbox, platform: Platform) -> None:
    team = platform.teams()[0]
    name = unique("hop")
    refused(member(sandbox, team), patched(small(name, team), {"serviceAccountName": CACHE_SA}), "service account")
    nothing_left(sandbox.client, team.namespace, name)


# -- 6. a member's TrainingRuntime ----------------------------------------------------------------


def test_attack6_member_runtimes_with_system_priority_or_host_access_are_refused(
    sandbox: Sandbox, platform: Platform
) -> None:
    editors = {
        rb["metadata"]["namespace"]
        for rb in platform.render.of_kind("RoleBinding")
        if rb["roleRef"]["name"].endswith("runtime-editor")
    }
    team = next((t for t in platform.teams() if t.namespace in editors), None)
    assert team is not None, "no render team may manage runtimes (manageRuntimes)"
    me, ns = member(sandbox, team), team.namespace
    torch = next(r for r in platform.runtimes() if r["metadata"]["name"] == "torch-distributed")
    refused(
        me,
        member_runtime(torch, ns, unique("prio"), {"priorityClassName": "system-node-critical"}),
        "priorityClassName",
    )
    host = {
        "hostPID": True,
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }
    # the API server reports the first failed validation: the hostPath volume, then hostPID on its own
    refused(me, member_runtime(torch, ns, unique("host"), host), "mounts a volume of a kind")
    refused(me, member_runtime(torch, ns, unique("pid"), {"hostPID": True}), "hostNetwork, hostPID or hostIPC")
    privileged = member_runtime(torch, ns, unique("priv"), {})
    for rj in privileged["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            c["securityContext"] = {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}
    refused(me, privileged, "privileged")
    # NET_BIND_SERVICE (the MPI runtimes' sshd) is the one capability a pod may add back: not as cover for another,
    # nor in an init container, nor under another spelling
    hostile: list[tuple[str, list[str]]] = [
        ("containers", ["NET_BIND_SERVICE", "SYS_ADMIN"]),
        ("initContainers", ["NET_RAW"]),
        ("containers", ["CAP_NET_BIND_SERVICE"]),
    ]
    for where, caps in hostile:
        added = member_runtime(torch, ns, unique("caps"), {})
        for rj in added["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = rj["template"]["spec"]["template"]["spec"]
            if where == "initContainers":
                pod["initContainers"] = [{"name": "init", "image": pod["containers"][0]["image"], "command": ["true"]}]
            for c in pod[where]:
                c["securityContext"] = {"capabilities": {"add": caps, "drop": ["ALL"]}}
        refused(me, added, "NET_BIND_SERVICE")
    # honest: a plain copy of a catalog runtime is accepted (Trainer's webhook included), and a job runs on it
    plain = member_runtime(torch, ns, unique("mine"), {})
    me.create(plain)
    try:
        job = trainjob(unique("onmine"), ns, gpus=1, nodes=1, queue=team.queue, cpu="1")
        job["spec"]["runtimeRef"] = {
            "name": plain["metadata"]["name"],
            "apiGroup": "trainer.kubeflow.org",
            "kind": "TrainingRuntime",
        }
        me.create(job, dry_run=True)
    finally:
        sandbox.client.delete(*RUNTIME, plain["metadata"]["name"], ns)


# -- 7. podSecurity: restricted -------------------------------------------------------------------------

PSA = "pod-security.kubernetes.io"


def _restricted_local_stack(enabled: list[str] | None) -> dict[str, Any]:
    raw = stack_raw("local")
    raw["teams"][0]["podSecurity"] = "restricted"
    if enabled is not None:
        raw.setdefault("runtimes", {})["enabled"] = enabled
    return raw


def _pod_security_refusals(admin: KubeClient, ns: str, name: str) -> list[str]:
    return [
        str(e.get("message", ""))
        for e in admin.list("v1", "Event", ns)
        if e["involvedObject"]["kind"] == "Job"
        and e["involvedObject"]["name"].startswith(f"{name}-")
        and "violates PodSecurity" in str(e.get("message", ""))
    ]


def test_attack7_restricted_team_runs_every_compliant_runtime_and_the_data_cache_is_refused_at_validate(
    sandbox: Sandbox, platform: Platform, clean_teams: None
) -> None:
    """A team namespace enforcing Pod Security `restricted` (labelled as the render labels a restricted team):
    every catalog runtime but the data cache's, MPI included (its sshd adds back only `NET_BIND_SERVICE`, which
    `restricted` allows), has its pods, initializers included, created by the real controllers and admitted by
    the API server's PodSecurity admission; `validate` refuses `restricted` while the data-cache runtime is
    served. kwok runs no containers: the real node's session runs them (tests/e2e/test_sandbox_runtimes.py)."""
    compliant = sorted(
        r["metadata"]["name"]
        for r in platform.runtimes()
        if "data-cache" not in r["metadata"]["annotations"].get("trainer-platform.io/requires", "")
    )
    assert {"deepspeed-distributed", "mlx-distributed"} <= set(compliant), compliant
    # validate time: the local stack with its first team restricted is refused, naming only the data cache ...
    with pytest.raises(ConfigError) as err:
        validate(_restricted_local_stack(None))
    ((issue),) = err.value.issues
    assert issue.path == "teams[0].podSecurity", issue.render()
    assert "torch-distributed-with-cache: " in issue.message, issue.message
    for name in compliant:
        assert f"{name}: " not in issue.message, issue.message
    # ... and accepted when it serves only runtimes that pass restricted
    validate(_restricted_local_stack(compliant))

    limited = {lr["metadata"]["namespace"] for lr in platform.render.of_kind("LimitRange")}
    team = next(t for t in platform.teams() if t.namespace in limited)
    me, admin, ns = member(sandbox, team), sandbox.client, team.namespace
    original = {k: v for k, v in admin.get("v1", "Namespace", ns)["metadata"]["labels"].items() if k.startswith(PSA)}
    admin.request(
        "PATCH",
        admin.path("v1", "Namespace", None, ns),
        {"metadata": {"labels": {f"{PSA}/enforce": "restricted", f"{PSA}/warn": "restricted"}}},
        content_type="application/merge-patch+json",
    )
    try:
        _run_restricted(sandbox, platform, team, me, admin, ns, compliant)
    finally:
        admin.request(
            "PATCH",
            admin.path("v1", "Namespace", None, ns),
            {"metadata": {"labels": original}},
            content_type="application/merge-patch+json",
        )


def _run_restricted(
    sandbox: Sandbox, platform: Platform, team: Team, me: KubeClient, admin: KubeClient, ns: str, compliant: list[str]
) -> None:
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    # the data scientist's flow: the SDK, a function with packages to install (pip --user into HOME)
    sdk = TrainerClient(
        backend_config=KubernetesBackendConfig(
            namespace=ns, config_file=str(sandbox.user_kubeconfig(team.user, team.groups))
        )
    )
    expected: dict[str, set[str]] = {}
    sshd: set[str] = set()  # the MPI jobs, whose node pods' sshd adds back NET_BIND_SERVICE
    sdk_job = sdk.train(
        runtime=sdk.get_runtime("torch-distributed"),
        trainer=CustomTrainer(func=_train, packages_to_install=["numpy"], resources_per_node={"gpu": 1, "cpu": 1}),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": team.queue})],
    )
    expected[sdk_job] = {"node"}
    for runtime in compliant:
        if runtime == "torch-distributed":
            continue
        name = unique(runtime.split("-")[0])
        mpi = "mpi" in next(r for r in platform.runtimes() if r["metadata"]["name"] == runtime)["spec"]["mlPolicy"]
        # an MPI job of 2 nodes: the launcher (rank 0) and one node pod, whose container runs sshd
        job = trainjob(name, team.namespace, gpus=1, nodes=2, queue=team.queue, cpu="1") if mpi else small(name, team)
        job["spec"]["runtimeRef"]["name"] = runtime
        expected[name] = {"launcher", "node"} if mpi else {"node"}
        if mpi:
            sshd.add(name)
        if runtime.startswith("torchtune"):
            job["spec"]["initializer"] = {
                "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
                "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
            }
            expected[name] = {"dataset-initializer", "model-initializer", "node"}
        me.create(job)

    def every_step_ran() -> bool:
        for name, steps in expected.items():
            pods = jobset_pods(admin, ns, name)
            seen = {p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") for p in pods}
            if seen != steps or not any(p["status"].get("phase") == "Running" for p in pods):
                return False
        return True

    try:
        wait_for(f"pods of every restricted-compliant runtime in {ns} ({sorted(expected)})", every_step_ran, 180)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
    for name in expected:
        assert _pod_security_refusals(admin, ns, name) == [], name
        for pod in jobset_pods(admin, ns, name):
            assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
            for container in pod["spec"]["containers"]:
                caps = container["securityContext"]["capabilities"]
                assert "ALL" in caps["drop"], (name, container["name"], caps)
                # the one capability added back: sshd's, in the MPI node pods (upstream's sshd carries it)
                assert set(caps.get("add", [])) <= {"NET_BIND_SERVICE"}, (name, container["name"], caps)
    for name in sshd:
        added = [
            c["securityContext"]["capabilities"].get("add")
            for p in jobset_pods(admin, ns, name)
            if p["metadata"]["labels"].get("jobset.sigs.k8s.io/replicatedjob-name") == "node"
            for c in p["spec"]["containers"]
        ]
        assert ["NET_BIND_SERVICE"] in added, (name, added)


def _train() -> None:  # the SDK ships this function's source to the trainer container
    print("restricted")


# -- 8. NetworkPolicies are real objects of the cluster ----------------------------------------------


def test_attack8_every_team_namespace_has_a_default_deny_network_policy(sandbox: Sandbox, platform: Platform) -> None:
    """Applied strictly with the render; whether they are enforced depends on the CNI (none here)."""
    for team in platform.teams():
        policies = sandbox.client.list("networking.k8s.io/v1", "NetworkPolicy", team.namespace)
        deny = [
            p
            for p in policies
            if p["spec"]["podSelector"] == {} and set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        ]
        assert deny, f"no default-deny NetworkPolicy in {team.namespace}: {[p['metadata']['name'] for p in policies]}"


# -- member read access: own ClusterQueue, pending positions ----------------------------------------


def test_members_read_their_own_cluster_queue_only(sandbox: Sandbox, platform: Platform) -> None:
    mine, other = platform.teams()[:2]
    me = member(sandbox, mine)

    def allowed(resource: str, name: str | None, group: str, ns: str | None = None, verb: str = "get") -> bool:
        return can(me, verb, resource, group, ns, name)

    own_cq = platform.cluster_queue(mine)["metadata"]["name"]
    other_cq = platform.cluster_queue(other)["metadata"]["name"]
    assert allowed("clusterqueues", own_cq, "kueue.x-k8s.io")
    assert not allowed("clusterqueues", other_cq, "kueue.x-k8s.io")
    assert me.get(*CQ, own_cq)["metadata"]["name"] == own_cq
    assert allowed("localqueues/pendingworkloads", mine.queue, "visibility.kueue.x-k8s.io", mine.namespace)
    assert not allowed("localqueues/pendingworkloads", other.queue, "visibility.kueue.x-k8s.io", other.namespace)
    assert not allowed("trainjobs", None, "trainer.kubeflow.org", mine.namespace, verb="patch")

    # the pending positions for real, through the aggregation layer to Kueue's visibility server (as
    # `kubectl get --raw` or kueuectl would): the member's own queue answers, another team's is forbidden
    def pending(team: Team) -> str:
        queue = f"namespaces/{team.namespace}/localqueues/{team.queue}"
        return f"/apis/visibility.kueue.x-k8s.io/v1beta2/{queue}/pendingworkloads"

    own = wait_for(f"Kueue's visibility API to answer {mine.user}", lambda: me.request("GET", pending(mine)), 120)
    assert own["kind"] == "PendingWorkloadsSummary" and isinstance(own.get("items"), list), own
    with pytest.raises(ApiError) as refused:
        me.request("GET", pending(other))
    assert refused.value.status == 403, refused.value
