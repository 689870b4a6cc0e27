"""The issue's scenarios against the real controllers, on the `local` stack's render only.

Teams, queues, cohort, priority classes, runtimes and kwok nodes all come from
``trainer-infra render --stack local``; quota numbers are read from the render, not assumed.
Tests run in file order and each cleans up its TrainJobs (quota is shared). The data cache runtime's run through
the same controllers: test_data_cache_runtime.py.
"""

from __future__ import annotations

import time
from functools import partial

import pytest

from tests.e2e.platform import (
    CQ,
    GPU,
    TJ,
    Obj,
    Platform,
    Team,
    admitted,
    describe_namespace,
    gpu_quota,
    has_condition,
    jobset_pods,
    trainjob,
    unique,
    wait_admitted,
    workload_of,
)
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.kwok_stages import FAIL_LABEL

pytestmark = pytest.mark.e2e

# -- 1. every catalog runtime is accepted by the Trainer webhook ---------------------------------


def test_every_runtime_accepted_by_trainer_webhook(sandbox: Sandbox, platform: Platform) -> None:
    """Each runtime was applied through the validating webhook; re-validate each as an update (dry run)."""
    runtimes = platform.runtimes()
    assert runtimes, "no ClusterTrainingRuntime in the render"
    for rt in runtimes:
        stored = sandbox.client.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", rt["metadata"]["name"])
        assert stored["metadata"]["uid"]
        sandbox.client.apply(rt, dry_run=True)


# -- 2. a data scientist's flow with the real kubeflow SDK ---------------------------------------


def train_fn() -> None:  # the SDK ships this function's source to the trainer container
    print("hello from the sandbox")


def test_data_scientist_flow_with_sdk(sandbox: Sandbox, platform: Platform, clean_teams: None) -> None:
    sdk_flow(sandbox, platform)


def sdk_flow(sandbox: Sandbox, platform: Platform) -> None:
    """list_runtimes → train → admitted → pods on the flavor's kwok nodes (also run on what `pulumi up` deployed)."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    team = platform.teams()[0]
    kubeconfig = sandbox.user_kubeconfig(team.user, team.groups)
    client = TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=team.namespace, config_file=str(kubeconfig))
    )
    names = [r.name for r in client.list_runtimes()]
    assert team.runtime in names
    runtime = client.get_runtime(team.runtime)
    job_name = client.train(
        runtime=runtime,
        # a data scientist's usual request: GPUs, cpu and memory per node.
        trainer=CustomTrainer(func=train_fn, num_nodes=2, resources_per_node={"gpu": 8, "cpu": 4, "memory": "64Gi"}),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": team.queue})],
    )
    job = client.get_job(job_name)
    assert job.name == job_name and job.runtime.name == team.runtime

    admin = sandbox.client
    ns = team.namespace
    wl = wait_admitted(admin, ns, job_name, 90, f" ({team.source})")
    cq = admin.get("kueue.x-k8s.io/v1beta2", "LocalQueue", team.queue, ns)["spec"]["clusterQueue"]
    assert wl["status"]["admission"]["clusterQueue"] == cq
    jobset = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", job_name, ns)
    assert "node" in [r["name"] for r in jobset["spec"]["replicatedJobs"]]

    def running() -> list[Obj] | bool:
        pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={job_name}")
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        return ok if len(ok) == 2 else False

    try:
        pods = wait_for(f"2 Running pods of {ns}/{job_name} on kwok nodes", running, 90)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
    nodes = [admin.get("v1", "Node", p["spec"]["nodeName"]) for p in pods]
    key, value = team.pool_label
    assert {n["metadata"]["labels"].get(key) for n in nodes} == {value}, "pods outside the queue's flavor"
    assert len({n["metadata"]["name"] for n in nodes}) == 2, "8 GPUs per pod: one pod per node"
    if team.topology_label:  # the runtime asks for podset-required-topology: one domain for all pods
        assert len({n["metadata"]["labels"][team.topology_label] for n in nodes}) == 1


# -- 3. quota, borrowing, priorities ---------------------------------------------------------------


def _pending_for(client: KubeClient, ns: str, name: str, seconds: float) -> Obj:
    """Assert a TrainJob's Workload exists and stays not admitted for ``seconds``."""
    wl: Obj | None = wait_for(f"Kueue to create the Workload of {ns}/{name}", lambda: workload_of(client, ns, name), 60)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        wl = workload_of(client, ns, name)
        assert wl is not None and not has_condition(wl, "QuotaReserved"), f"{ns}/{name} was admitted: {wl}"
        time.sleep(1)
    assert wl is not None
    return wl


def _condition(wl: Obj | None, kind: str) -> Obj | None:
    """A True condition of a Workload, or None."""
    for c in (wl or {}).get("status", {}).get("conditions", []):
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def wait_preempted(client: KubeClient, ns: str, trainjob: str, timeout: float, why: str) -> Obj:
    """Wait for Kueue's ``Preempted`` condition on a TrainJob's Workload; return that condition."""
    try:
        cond: Obj = wait_for(
            f"Kueue to preempt TrainJob {ns}/{trainjob} ({why})",
            lambda: _condition(workload_of(client, ns, trainjob), "Preempted"),
            timeout,
        )
    except TimeoutError as exc:
        current = workload_of(client, ns, trainjob)
        conds = current.get("status", {}).get("conditions") if current else "no Workload"
        raise TimeoutError(f"{exc}; Workload conditions: {conds}") from None
    return cond


def gpu_usage(client: KubeClient, cluster_queue: str) -> tuple[int, int]:
    """(total, borrowed) GPUs a ClusterQueue has reserved, from Kueue's status."""
    cq = client.get(*CQ, cluster_queue)
    for flavor in cq.get("status", {}).get("flavorsReservation", []):
        for res in flavor["resources"]:
            if res["name"] == GPU:
                return int(res.get("total", 0)), int(res.get("borrowed", 0))
    return 0, 0


def wait_gpu_usage(client: KubeClient, cluster_queue: str, total: int, borrowed: int) -> None:
    """Kueue updates a ClusterQueue's status after admitting: wait for the reserved/borrowed GPUs."""
    try:
        wait_for(
            f"ClusterQueue {cluster_queue} status to show {total} GPUs reserved, {borrowed} borrowed",
            lambda: gpu_usage(client, cluster_queue) == (total, borrowed),
            30,
        )
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; (reserved, borrowed) is {gpu_usage(client, cluster_queue)}") from None


def _lender_and_borrower(platform: Platform) -> tuple[Team, Team]:
    """The team whose GPU quota has a lendingLimit lends; another team in its cohort borrows."""
    teams = platform.teams()
    lender = next((t for t in teams if "lendingLimit" in gpu_quota(platform.cluster_queue(t))), None)
    assert lender is not None, "no rendered ClusterQueue has a GPU lendingLimit: nothing to borrow up to"
    cohort = platform.cluster_queue(lender)["spec"]["cohortName"]
    borrower = next(t for t in teams if t != lender and platform.cluster_queue(t)["spec"].get("cohortName") == cohort)
    return lender, borrower


def test_quota_borrowing_and_reclaim(sandbox: Sandbox, platform: Platform, clean_teams: None) -> None:
    """Borrowing up to the lender's lendingLimit, Kueue's reason beyond it, reclaim by the lender.

    On the rendered queues of stack local: nlp (quota 128) borrows from an idle vision
    (quota 128, lendingLimit 64); the numbers are read from the render.
    """
    lender, borrower = _lender_and_borrower(platform)
    lcq, bcq = platform.cluster_queue(lender), platform.cluster_queue(borrower)
    # The flow below is what these rendered policies promise; another policy needs another scenario.
    assert lcq["spec"]["preemption"]["reclaimWithinCohort"] == "Any", lcq["spec"]["preemption"]
    assert "borrowingLimit" not in gpu_quota(bcq), "scenario assumes the borrower may borrow all that is lent"
    per_node = platform.gpus_per_node()
    nominal = int(gpu_quota(bcq)["nominalQuota"])
    lent = int(gpu_quota(lcq)["lendingLimit"])
    lender_nominal = int(gpu_quota(lcq)["nominalQuota"])
    block = platform.nodes_per_domain(borrower.topology_label or "kubernetes.io/hostname")
    assert nominal // per_node <= block and lender_nominal // per_node <= block, "a job must fit one block"
    ns, lns = borrower.namespace, lender.namespace
    me = sandbox.user_client(borrower.user, borrower.groups)
    them = sandbox.user_client(lender.user, lender.groups)
    admin = sandbox.client
    # Jobs ask for cpu 1 per pod: nlp's ResourceQuota allows 32 requested CPUs and 24 pods run here at once.

    # 1. The borrower fills its nominal quota: admitted without borrowing.
    own = unique("own")
    me.create(trainjob(own, ns, gpus=per_node, nodes=nominal // per_node, queue=borrower.queue, cpu="1"))
    wait_admitted(admin, ns, own, 90, f" within {ns}'s nominal quota of {nominal} GPUs")
    wait_gpu_usage(admin, bcq["metadata"]["name"], nominal, 0)

    # 2. With the lender idle, the next job borrows exactly what the lender may lend. Kueue picks
    #    preemption victims newest-admitted first, by timestamps of one-second resolution: without a gap,
    #    `own` and `borrowed` can tie and the reclaim below may take `own` instead (seen in 2 of 4 runs).
    time.sleep(1.5)
    borrowed = unique("borrow")
    me.create(trainjob(borrowed, ns, gpus=per_node, nodes=lent // per_node, queue=borrower.queue, cpu="1"))
    wait_admitted(admin, ns, borrowed, 90, f" by borrowing {lent} GPUs lent by idle {lns}")
    wait_gpu_usage(admin, bcq["metadata"]["name"], nominal + lent, lent)

    # 3. Beyond the lendingLimit: pending, and Kueue says why (the lender's other GPUs are not lendable).
    extra = unique("extra")
    me.create(trainjob(extra, ns, gpus=per_node, nodes=1, queue=borrower.queue, cpu="1"))
    wl = _pending_for(admin, ns, extra, 5)
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False" and reserved["reason"] == "Pending", reserved
    assert f"insufficient unused quota for {GPU}" in reserved["message"], reserved["message"]

    # 4. The lender takes its whole nominal quota back: Kueue reclaims by preempting the borrowing job
    #    (reclaimWithinCohort: Any, priorities equal); the job within nominal quota is untouched.
    back = unique("reclaim")
    them.create(trainjob(back, lns, gpus=per_node, nodes=lender_nominal // per_node, queue=lender.queue, cpu="1"))
    try:
        cond = wait_preempted(admin, ns, borrowed, 90, f"{lns} reclaims its lent quota")
    except TimeoutError as exc:
        lender_wl = workload_of(admin, lns, back)
        lender_conds = lender_wl.get("status", {}).get("conditions") if lender_wl else "no Workload"
        raise TimeoutError(f"{exc}; the lender's Workload {lns}/{back}: {lender_conds}") from None
    assert cond["reason"] == "InCohortReclamation", cond
    wait_admitted(admin, lns, back, 90, f" after reclaiming {lent} lent GPUs")
    assert admitted(admin, ns, own) is not None, f"{ns}/{own} (within nominal quota) lost its admission"
    for name in (borrowed, extra):
        assert admitted(admin, ns, name) is None, f"{ns}/{name} admitted while {lns} uses its whole quota"
    wait_gpu_usage(admin, lcq["metadata"]["name"], lender_nominal, 0)


@pytest.mark.parametrize("preemptor", ["high", None], ids=["high", "unlabelled"])
def test_priority_preempts_within_queue(
    sandbox: Sandbox, platform: Platform, clean_teams: None, preemptor: str | None
) -> None:
    """Within one rendered ClusterQueue (withinClusterQueue: LowerPriority) `high` preempts `low`, and so
    does a job without a priority label: it gets the default class's value (`normal`, 0: what Kueue gives
    unlabelled jobs), above `low`.

    The other team uses its whole quota first, so nothing can be borrowed and the queue's own
    nominal quota is what the two jobs compete for.
    """
    lender, team = _lender_and_borrower(platform)
    cq = platform.cluster_queue(team)
    policy = cq["spec"]["preemption"]
    assert policy["withinClusterQueue"] == "LowerPriority" and policy["borrowWithinCohort"]["policy"] == "Never", policy
    priorities = {p["metadata"]["name"]: p["value"] for p in platform.render.of_kind("WorkloadPriorityClass")}
    expected = priorities[preemptor or "normal"]
    if preemptor is None:
        assert expected == 0, f"the default class normal must have Kueue's unlabelled priority 0: {priorities}"
    assert expected > priorities["low"], priorities
    per_node = platform.gpus_per_node()
    nominal = int(gpu_quota(cq)["nominalQuota"])
    lender_nominal = int(gpu_quota(platform.cluster_queue(lender))["nominalQuota"])
    admin = sandbox.client
    ns, lns = team.namespace, lender.namespace

    other = unique("full")
    sandbox.user_client(lender.user, lender.groups).create(
        trainjob(other, lns, gpus=per_node, nodes=lender_nominal // per_node, queue=lender.queue, cpu="1")
    )
    wait_admitted(admin, lns, other, 90, f" ({lns} using its whole quota)")
    me = sandbox.user_client(team.user, team.groups)
    low = unique("low")
    me.create(trainjob(low, ns, gpus=per_node, nodes=nominal // per_node, priority="low", queue=team.queue, cpu="1"))
    wait_admitted(admin, ns, low, 90, f" (low priority, {nominal} GPUs)")
    urgent = unique(preemptor or "plain")
    me.create(trainjob(urgent, ns, gpus=per_node, nodes=1, priority=preemptor, queue=team.queue, cpu="1"))
    cond = wait_preempted(admin, ns, low, 90, f"{preemptor or 'unlabelled'} {urgent} in the same ClusterQueue")
    assert cond["reason"] == "InClusterQueue", cond
    wl = wait_admitted(admin, ns, urgent, 90, f" after preempting {low}")
    assert wl["spec"].get("priority", 0) == expected
    assert admitted(admin, ns, low) is None
    assert admitted(admin, lns, other) is not None, f"{lns}/{other} within its nominal quota was preempted"


# -- 4. RBAC ---------------------------------------------------------------------------------------


def test_team_cannot_create_in_other_team_namespace(sandbox: Sandbox, platform: Platform) -> None:
    mine, other = platform.teams()[:2]
    member = sandbox.user_client(mine.user, mine.groups)

    def allowed(ns: str) -> bool:
        review = member.request(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {
                    "resourceAttributes": {
                        "group": "trainer.kubeflow.org",
                        "resource": "trainjobs",
                        "verb": "create",
                        "namespace": ns,
                    }
                },
            },
        )
        return bool(review["status"]["allowed"])

    assert allowed(mine.namespace), f"{mine.user} cannot create TrainJobs in their own namespace ({mine.source})"
    assert not allowed(other.namespace)
    with pytest.raises(ApiError) as err:
        member.create(
            trainjob(unique("intruder"), other.namespace, gpus=1, nodes=1, runtime=other.runtime, queue=other.queue),
            dry_run=True,
        )
    assert err.value.status == 403


# -- 5. MPI and initializers produce the expected replicated jobs in order ------------------------


def _jobs_byunique(client: KubeClient, ns: str, jobset: str) -> dict[str, Obj]:
    jobs = client.list("batch/v1", "Job", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={jobset}")
    return {j["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]: j for j in jobs}


def test_mpi_and_initializer_runtimes(sandbox: Sandbox, platform: Platform, clean_teams: None) -> None:
    """The catalog's deepspeed and torchtune runtimes, in a render team whose namespace has a LimitRange."""
    admin = sandbox.client
    catalog = {r["metadata"]["name"]: r for r in platform.render.of_kind("ClusterTrainingRuntime")}
    tune_name = next((n for n in sorted(catalog) if n.startswith("torchtune-")), None)
    # Kueue admits initializer podsets only if they request something: a LimitRange default supplies it.
    limited = {lr["metadata"]["namespace"] for lr in platform.render.of_kind("LimitRange")}
    team = next((t for t in platform.render_teams() if t.namespace in limited), None)
    assert "deepspeed-distributed" in catalog and tune_name, f"catalog lacks deepspeed/torchtune: {sorted(catalog)}"
    assert team is not None, "no render team namespace has a LimitRange"
    ns, queue, ds_rt, tt_rt = team.namespace, team.queue, "deepspeed-distributed", tune_name
    runtimes = catalog

    mpi = unique("ds")
    admin.create(trainjob(mpi, ns, gpus=1, nodes=2, runtime=ds_rt, queue=queue))
    js = wait_for(f"JobSet {ns}/{mpi}", lambda: admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", mpi, ns), 60)
    assert [r["name"] for r in js["spec"]["replicatedJobs"]] == ["launcher", "node"]
    wait_admitted(admin, ns, mpi, 60)
    wait_for(
        f"launcher and node Jobs of {mpi}", lambda: sorted(_jobs_byunique(admin, ns, mpi)) == ["launcher", "node"], 60
    )

    tt = unique("tune")
    job = trainjob(tt, ns, gpus=1, nodes=1, runtime=tt_rt, queue=queue)
    job["spec"]["initializer"] = {
        "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
        "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
    }
    admin.create(job)
    js = wait_for(f"JobSet {ns}/{tt}", lambda: admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", tt, ns), 60)
    order = [r["name"] for r in js["spec"]["replicatedJobs"]]
    assert order == ["dataset-initializer", "model-initializer", "node"]
    expected_deps = {
        j["name"]: [d["name"] for d in j.get("dependsOn", [])]
        for j in runtimes[tt_rt]["spec"]["template"]["spec"]["replicatedJobs"]
    }
    deps = {r["name"]: [d["name"] for d in r.get("dependsOn", [])] for r in js["spec"]["replicatedJobs"]}
    assert deps == expected_deps and deps["node"], deps
    wait_admitted(admin, ns, tt, 60)
    # Initializer pods complete (kwok stage); JobSet creates a Job only once its dependencies are Complete.
    try:
        wait_for(
            f"{ns}/{tt}: all three Jobs created",
            lambda: sorted(_jobs_byunique(admin, ns, tt)) == ["dataset-initializer", "model-initializer", "node"],
            90,
        )
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
    jobs = _jobs_byunique(admin, ns, tt)
    for step, needs in deps.items():
        created = jobs[step]["metadata"]["creationTimestamp"]
        for dep in needs:
            done = jobs[dep]["status"].get("completionTime")
            assert done is not None, f"{dep} Job did not complete"
            assert done <= created, f"{step} Job created at {created} before {dep} completed at {done}"


# -- 6. per-TrainJob workspaces on the team claim --------------------------------------------------

WORKSPACE_VOLUME = "initializer"


def workspace_path(pod: Obj) -> set[tuple[str, str, str]]:
    """(container, mountPath, claim sub-path) of every mount of the team claim, with `$(VAR)` in the
    subPathExpr expanded the way kubelet does: from the container's env, downward-API labels of this pod."""
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    claim = volumes[WORKSPACE_VOLUME]["persistentVolumeClaim"]["claimName"]
    labels = pod["metadata"].get("labels", {})
    found = set()
    for c in pod["spec"]["containers"]:
        env: dict[str, str] = {}
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
            if ref.startswith("metadata.labels['"):
                env[e["name"]] = labels.get(ref[len("metadata.labels['") : -2], "")
            elif "value" in e:
                env[e["name"]] = e["value"]
        for m in c.get("volumeMounts", []):
            if m["name"] != WORKSPACE_VOLUME:
                continue
            sub = m.get("subPathExpr") or m.get("subPath") or ""
            for name, value in env.items():
                sub = sub.replace(f"$({name})", value)
            assert "$(" not in sub, f"{pod['metadata']['name']}/{c['name']}: unexpanded {sub}"
            found.add((c["name"], m["mountPath"], f"{claim}:{sub}"))
    return found


def test_concurrent_trainjobs_get_their_own_workspace(sandbox: Sandbox, platform: Platform, clean_teams: None) -> None:
    """Two TrainJobs of one team on an initializer runtime: each job's initializers and trainer mount the
    team claim at the same path, on a sub-directory of its own (jobs/<trainjob>)."""
    admin = sandbox.client
    catalog = {r["metadata"]["name"] for r in platform.render.of_kind("ClusterTrainingRuntime")}
    tune = next(n for n in sorted(catalog) if n.startswith("torchtune-"))
    limited = {lr["metadata"]["namespace"] for lr in platform.render.of_kind("LimitRange")}
    team = next(t for t in platform.render_teams() if t.namespace in limited)
    ns = team.namespace
    names = [unique("ws-a"), unique("ws-b")]
    for name in names:
        job = trainjob(name, ns, gpus=1, nodes=1, runtime=tune, queue=team.queue, cpu="1")
        job["spec"]["initializer"] = {
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca"},
            "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
        }
        sandbox.user_client(team.user, team.groups).create(job)

    def all_steps(name: str) -> list[Obj] | bool:
        pods = jobset_pods(admin, ns, name)
        steps = {p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] for p in pods}
        return pods if steps == {"dataset-initializer", "model-initializer", "node"} else False

    paths: dict[str, set[str]] = {}
    for name in names:
        try:
            pods = wait_for(f"{ns}/{name}: initializer and trainer pods", partial(all_steps, name), 120)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{describe_namespace(admin, ns)}") from None
        mounts = set().union(*(workspace_path(p) for p in pods))
        assert {c for c, _, _ in mounts} >= {"dataset-initializer", "model-initializer", "node"}, mounts
        assert len({(m, p) for _, m, p in mounts}) == 1, f"{name}: steps disagree on the workspace: {mounts}"
        paths[name] = {p for _, _, p in mounts}
        assert paths[name] == {f"workspace:jobs/{name}"}, paths[name]
    assert paths[names[0]] != paths[names[1]]


# -- 7. fault tolerance: restarts up to the limit, then failure and released quota -----------------


def _fail_pod(client: KubeClient, pod: Obj, exit_code: int) -> None:
    path = client.path("v1", "Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
    patch = {"metadata": {"labels": {FAIL_LABEL: str(exit_code)}}}
    client.request("PATCH", path, patch, content_type="application/merge-patch+json")


def _running_node_pod(client: KubeClient, ns: str, name: str, attempt: int) -> Obj:
    def running() -> Obj | None:
        for p in jobset_pods(client, ns, name):
            labels = p["metadata"]["labels"]
            if (
                labels.get("jobset.sigs.k8s.io/replicatedjob-name") == "node"
                and labels.get("jobset.sigs.k8s.io/restart-attempt") == str(attempt)
                and p["status"].get("phase") == "Running"
            ):
                return p
        return None

    try:
        pod: Obj = wait_for(f"{ns}/{name}: a Running node pod of restart attempt {attempt}", running, 90)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{describe_namespace(client, ns)}") from None
    return pod


def _has_restarted(client: KubeClient, ns: str, name: str, times: int) -> bool:
    js = client.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, ns)
    return int(js.get("status", {}).get("restarts", 0)) == times


def _trainjob_failed(client: KubeClient, ns: str, name: str) -> Obj | None:
    tj = client.get(*TJ, name, ns)
    return tj if has_condition(tj, "Failed") else None


def test_failing_job_restarts_up_to_the_limit_then_fails(
    sandbox: Sandbox, platform: Platform, clean_teams: None
) -> None:
    """A retriable failure restarts the whole JobSet `maxRestarts` times; one more fails the TrainJob and
    Kueue releases the quota. A non-retriable exit code fails it at once."""
    runtime = next(
        r for r in platform.render.of_kind("ClusterTrainingRuntime") if r["metadata"]["name"] == "torch-distributed"
    )
    spec = runtime["spec"]["template"]["spec"]
    max_restarts = int(spec["failurePolicy"]["maxRestarts"])
    node = next(j for j in spec["replicatedJobs"] if j["name"] == "node")
    fatal = [
        code
        for rule in node["template"]["spec"]["podFailurePolicy"]["rules"]
        if rule["action"] == "FailJob"
        for code in rule.get("onExitCodes", {}).get("values", [])
    ]
    assert fatal, "the rendered runtime fails no exit code at once"
    team = platform.teams()[0]
    ns, admin = team.namespace, sandbox.client
    me = sandbox.user_client(team.user, team.groups)
    cq = platform.cluster_queue(team)["metadata"]["name"]

    flaky = unique("flaky")
    me.create(trainjob(flaky, ns, gpus=1, nodes=1, queue=team.queue, cpu="1"))
    wait_admitted(admin, ns, flaky, 90)
    for attempt in range(max_restarts + 1):
        _fail_pod(admin, _running_node_pod(admin, ns, flaky, attempt), 1)
        if attempt < max_restarts:
            wait_for(
                f"JobSet {ns}/{flaky} to restart ({attempt + 1})",
                partial(_has_restarted, admin, ns, flaky, attempt + 1),
                60,
            )
    tj = wait_for(
        f"TrainJob {ns}/{flaky} Failed after {max_restarts} restarts", lambda: _trainjob_failed(admin, ns, flaky), 90
    )
    js = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", flaky, ns)
    assert js["status"]["restarts"] == max_restarts, js["status"]
    wait_for(
        f"Workload of {ns}/{flaky} Finished", lambda: has_condition(workload_of(admin, ns, flaky) or {}, "Finished"), 60
    )
    wait_gpu_usage(admin, cq, 0, 0)
    assert tj["status"]["conditions"]

    fatal_job = unique("fatal")
    me.create(trainjob(fatal_job, ns, gpus=1, nodes=1, queue=team.queue, cpu="1"))
    wait_admitted(admin, ns, fatal_job, 90)
    _fail_pod(admin, _running_node_pod(admin, ns, fatal_job, 0), int(fatal[0]))
    wait_for(f"TrainJob {ns}/{fatal_job} Failed at once", lambda: _trainjob_failed(admin, ns, fatal_job), 90)
    js = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", fatal_job, ns)
    assert js["status"].get("restarts", 0) == 0, js["status"]
    wait_gpu_usage(admin, cq, 0, 0)
