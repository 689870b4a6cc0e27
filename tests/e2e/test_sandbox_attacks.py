"""The hostile-tenant attacks where a real container changes what is proven (issue #28 item 5, "the attacks of the
hostile-tenant tests pass on this cluster too"), on the platform the real ``pulumi up`` installed on the real node
(the sandbox session, tests/e2e/sandbox_session.py), as the team members sandbox.json names. Each is asserted from
what really ran: the process's own ``/proc/self/status``, the files on the host directory behind the claim, the
kubelet's refusal, the token the kubelet projected used from outside.

Per attack of test_attacks.py and test_deputies.py (run in the install session, on kwok pods), what runs here:

- attack 1 (another team's data): the honest variant runs for real: the member's job mounts the whole team claim,
  writes as uid 1000 under ``restricted`` (uid, capabilities, ``no_new_privs``, seccomp read inside the process), and
  plants symlinks in the claim; a later job whose ``subPathExpr`` directory is such a symlink (to the other team's
  export, to the node's ``/``) never starts: the kubelet's subpath check refuses it. The refused volume kinds are
  refused at admission: nothing runs, nothing to add.
- attacks 2 (no queue), 3 (lifting suspend), 5 (another ServiceAccount) and the policies' type-check: admission and
  RBAC refuse before any object exists; a container adds nothing.
- attack 4 (quota held by pods never ready): the ``vision`` member's job names an image the mirror never got; the
  kubelet's pull fails for good and the pod never gets ready. After the sandbox's ``waitForPodsReady`` timeout
  (``PODS_READY_TIMEOUT``) Kueue evicts the Workload (``PodsReadyTimeout``), the kubelet ends the pod, the team's
  ClusterQueue holds none of its GPUs, and the Workload waits for its requeue. Submitted before this module's first
  test, so the timeout runs while the other attacks do.
- attack 6 (a member's TrainingRuntime): the refusals are at the runtime's admission, no pod exists; here the
  ``vision`` member's own runtime (a copy of the catalog's) really runs a job, as uid 1000 without capabilities.
- attack 7 (``restricted``): every compliant runtime runs in the restricted team in test_sandbox_runtimes.py; here
  the restricted job's process shows what ``restricted`` means on the node.
- attack 8 (NetworkPolicies): enforced, test_sandbox_network.py.
- deputies 1-4 and 6 (initializer env, patches into initializers, GPU env, Pod Security at submit, any pod of a team
  namespace): refused at admission, nothing runs. 5 (the cache initializer's account): the sandbox stack has no data
  cache (no cache image here: test_sandbox_runtimes.py ``CANNOT_RUN``).
- the identity a member's code holds in its pod (who acts for the member there): the ServiceAccount token the kubelet
  projected into the job's pod, taken out through the claim and used from the host: it is ``default``'s, bound to
  that pod, may do nothing the member may not, and stops working once the pod is gone. The MPI runtimes' launcher,
  the pod that logs into the others, holds the same identity: each rank prints its token's subject and pod
  (test_sandbox_runtimes.py, ``_check_mpi``). The initializers' pods cannot run here (no hub or bucket reachable);
  their pod specs are checked at admission (test_deputies.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.member_requests import RUNTIME, can, claim_patch, duration_seconds, member_runtime, patched
from tests.e2e.platform import CQ, GPU, has_condition, unique, wait_admitted, workload_of
from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from tests.e2e.test_sandbox_network import RUNTIME as CATALOG_RUNTIME
from tests.e2e.test_sandbox_network import script_trainjob
from tests.e2e.test_sandbox_up import TJ, finished
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.platform_sandbox import PODS_READY_TIMEOUT, TRAINER_ID, node_dir

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
#: the credentials a process of a team job runs with, printed by the process itself (``/proc/self/status``)
CREDENTIALS = """
import os
status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines() if ':' in line)
for key in ('Uid', 'Gid', 'CapEff', 'CapPrm', 'CapBnd', 'NoNewPrivs', 'Seccomp'):
    print(f"{key}: {' '.join(status[key].split())}", flush=True)
"""
#: the honest variant of attack 1 (the whole team claim at /data, its own directory at /workspace), which also
#: plants ``$LINKS`` (``name=target,…``) in the claim's ``jobs/`` and takes its pod's token out through the claim
PLANT = (
    CREDENTIALS
    + f"""
with open('/workspace/written', 'w') as out:
    out.write(os.environ['TRAIN_JOB_NAME'])
print('wrote /workspace/written', flush=True)
for link in os.environ['LINKS'].split(','):
    name, _, target = link.partition('=')
    os.symlink(target, os.path.join('/data/jobs', name))
    print(f'planted /data/jobs/{{name}} -> {{target}}', flush=True)
if os.path.exists('{TOKEN}'):
    with open('{TOKEN}') as src, open('/workspace/token', 'w') as dst:
        dst.write(src.read())
    print('token taken', flush=True)
else:
    print('no token mounted', flush=True)
"""
)
#: a job whose ``/workspace`` (``subPathExpr: jobs/$(TRAIN_JOB_NAME)``) is one of the planted symlinks
ESCAPE = "import os; open('/workspace/escaped', 'w').write('x'); print('escaped into', os.listdir('/workspace'))"
#: what ``restricted`` (and the platform's runtime securityContext) gives a job's process on the node: uid/gid 1000,
#: no capability (effective, permitted, bounding), no_new_privs, a seccomp filter (RuntimeDefault)
RESTRICTED = {
    "Uid": f"{TRAINER_ID} {TRAINER_ID} {TRAINER_ID} {TRAINER_ID}",
    "Gid": f"{TRAINER_ID} {TRAINER_ID} {TRAINER_ID} {TRAINER_ID}",
    "CapEff": "0000000000000000",
    "CapPrm": "0000000000000000",
    "CapBnd": "0000000000000000",
    "NoNewPrivs": "1",
    "Seccomp": "2",
}


def _lines(log: str) -> dict[str, str]:
    return {k: v.strip() for k, _, v in (line.partition(":") for line in log.splitlines()) if v}


def _run(sb: RunningSandbox, who: Member, job: Obj) -> str:
    """``who`` submits ``job``; its log once it completed (an error with the log when it failed)."""
    name, ns = job["metadata"]["name"], who.namespace
    who.client().create(job)
    done = wait_for(f"TrainJob {ns}/{name} to finish", lambda: finished(sb.admin, ns, name), 600)
    pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    log = "\n".join(sb.admin.log(p["metadata"]["name"], ns) for p in pods)
    print(f"\n[attacks] {ns}/{name}:\n{log}", flush=True)
    conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    assert conditions.get("Complete") == "True", (done["status"], log)
    return log


def _delete(sb: RunningSandbox, ns: str, *names: str) -> None:
    """Delete TrainJobs and wait for their pods to go (the quota comes back, the pods' tokens end)."""
    for name in names:
        sb.admin.delete(TJ, "TrainJob", name, ns)

    def gone() -> bool:
        return not [
            p
            for p in sb.admin.list("v1", "Pod", ns)
            if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") in names
        ]

    wait_for(f"the pods of {names} to be gone", gone, 180)


@dataclass
class Planted:
    """Attack 1's honest job (the restricted team's member; the other team's is the victim): its name, log, pod, and
    the symlinks it left in the claim (job name → target)."""

    attacker: Member
    victim: Member
    name: str
    log: str
    pod: Obj
    links: dict[str, str]


@pytest.fixture(scope="module")
def planted(platform_sandbox: RunningSandbox) -> Iterator[Planted]:
    sb = platform_sandbox
    attacker, victim = sb.member(0), sb.member(1)
    ns = attacker.namespace
    claim = next(c["claim"] for c in sb.doc["claims"] if c["namespace"] == ns)
    jobs = sb.host_directory(ns, claim) / "jobs"
    # the other team's export as the attacker's ``jobs/`` sees it (relative: what code inside a pod can guess), and
    # the node's root
    links = {
        unique("escape"): os.path.relpath(sb.host_directory(victim.namespace), jobs),
        unique("escape"): "/",
    }
    name = unique("claim")
    env = {"LINKS": ",".join(f"{k}={v}" for k, v in links.items())}
    job = patched(script_trainjob(attacker, name, 1, PLANT, env), claim_patch(claim))
    log = _run(sb, attacker, job)
    (pod,) = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    try:
        yield Planted(attacker, victim, name, log, pod, links)
    finally:
        _delete(sb, ns, name)


def test_attack1_member_code_writes_the_team_claim_as_uid_1000_and_a_planted_symlink_leads_nowhere(
    platform_sandbox: RunningSandbox, planted: Planted
) -> None:
    sb, attacker, victim = platform_sandbox, planted.attacker, planted.victim
    ns = attacker.namespace
    start = time.monotonic()
    # the honest variant ran in the restricted team: as uid 1000, without capabilities, no_new_privs, seccomp ...
    ran = _lines(planted.log)
    assert {k: ran.get(k) for k in RESTRICTED} == RESTRICTED, planted.log
    # ... with the whole team claim and its own directory mounted: what it wrote is on the export, as uid 1000
    own = sb.host_directory(ns) / "jobs" / planted.name
    written = own / "written"
    assert written.read_text() == planted.name and written.stat().st_uid == TRAINER_ID
    for name, target in planted.links.items():
        link = sb.host_directory(ns) / "jobs" / name
        assert os.readlink(link) == target and link.lstat().st_uid == TRAINER_ID, (link, target)

    # the jobs named like the symlinks: the kubelet resolves `jobs/$(TRAIN_JOB_NAME)` and refuses to mount a
    # directory outside the claim; their container never starts
    victim_dir = sb.host_directory(victim.namespace)
    before = sorted(str(p) for p in victim_dir.rglob("*"))
    for name in planted.links:
        attacker.client().create(script_trainjob(attacker, name, 1, ESCAPE, {}))

    def refused(name: str) -> Obj | None:
        pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        for pod in pods:
            for status in pod["status"].get("containerStatuses", []):
                assert "waiting" in status["state"], (name, status)  # never running, never ended
                if status["state"]["waiting"].get("reason") == "CreateContainerConfigError":
                    return dict(status["state"]["waiting"])
        return None

    try:
        for name, target in planted.links.items():
            waiting = wait_for(f"the kubelet to refuse {ns}/{name}'s mount ({target})", partial(refused, name), 300)
            print(f"\n[attacks] {name} -> {target}: {waiting}", flush=True)
            assert 'failed to prepare subPath for volumeMount "initializer" of container "node"' in waiting.get(
                "message", ""
            ), waiting
        kubelet = (node_dir(sb.state) / "logs" / "kubelet.log").read_text(errors="replace")
        assert any("not within volume path" in line and str(victim_dir) in line for line in kubelet.splitlines()), (
            "the kubelet's log does not name the other team's export as outside the claim"
        )
    finally:
        _delete(sb, ns, *planted.links)
    assert sorted(str(p) for p in victim_dir.rglob("*")) == before, "the other team's export changed"
    assert not (Path("/") / "escaped").exists()
    sb.times["attack 1: symlinked subPathExpr refused"] = round(time.monotonic() - start, 1)


#: what the token of a job's pod is asked, in the team's namespace and the other team's: (verb, group, resource)
ASKED = [
    ("create", "trainer.kubeflow.org", "trainjobs"),
    ("patch", "trainer.kubeflow.org", "trainjobs"),
    ("create", "trainer.kubeflow.org", "trainingruntimes"),
    ("create", "jobset.x-k8s.io", "jobsets"),
    ("create", "batch", "jobs"),
    ("create", "", "pods"),
    ("create", "", "pods/exec"),
    ("list", "", "pods"),
    ("get", "", "pods/log"),
    ("list", "", "secrets"),
    ("create", "", "serviceaccounts/token"),
    ("impersonate", "", "serviceaccounts"),
    ("update", "kueue.x-k8s.io", "workloads/status"),
    ("patch", "kueue.x-k8s.io", "workloads"),
    ("create", "rbac.authorization.k8s.io", "rolebindings"),
    ("update", "", "namespaces"),
    ("create", "leaderworkerset.x-k8s.io", "leaderworkersets"),
]


def test_the_token_in_a_member_pod_may_do_nothing_the_member_may_not_and_ends_with_the_pod(
    platform_sandbox: RunningSandbox, planted: Planted
) -> None:
    sb, attacker, victim = platform_sandbox, planted.attacker, planted.victim
    ns = attacker.namespace
    assert "token taken" in planted.log, planted.log  # the kubelet projected one (no automount opt-out)
    token = (sb.host_directory(ns) / "jobs" / planted.name / "token").read_text()
    held = sb.token_client(token)
    me = attacker.client()
    review = held.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    who = review["status"]["userInfo"]
    assert planted.pod["spec"]["serviceAccountName"] == "default"
    assert who["username"] == f"system:serviceaccount:{ns}:default", who
    assert who["extra"]["authentication.kubernetes.io/pod-name"] == [planted.pod["metadata"]["name"]], who
    granted = {
        (space, verb, group, resource): (can(held, verb, resource, group, space), can(me, verb, resource, group, space))
        for space in (ns, victim.namespace)
        for verb, group, resource in ASKED
    }
    print(f"\n[attacks] token of {planted.pod['metadata']['name']} / member {attacker.user}: {granted}", flush=True)
    beyond = [k for k, (token_may, member_may) in granted.items() if token_may and not member_may]
    assert beyond == [], f"the pod's token may do what its member may not: {beyond}"
    for path in (sb.admin.path("v1", "Secret", ns), sb.admin.path(TJ, "TrainJob", victim.namespace)):
        with pytest.raises(ApiError) as err:
            held.request("GET", path)
        assert err.value.status == 403, err.value.message
    # the token is bound to its pod: once the job is deleted, it authenticates no one (after the API server's cache
    # of a token's success, 10 s: kube-apiserver's TokenSuccessCacheTTL; it still authenticated right after)
    _delete(sb, ns, planted.name)

    def unauthenticated() -> bool:
        try:
            held.request("GET", "/api")
        except ApiError as exc:
            assert exc.status == 401, exc.message
            return True
        return False

    wait_for("the deleted pod's token to authenticate no one", unauthenticated, 60)


def test_attack6_a_members_own_runtime_runs_its_job_as_uid_1000_without_capabilities(
    platform_sandbox: RunningSandbox,
) -> None:
    """The ``vision`` member (``manageRuntimes``, a ``baseline`` team) runs a job on a TrainingRuntime of their own,
    a copy of the catalog's: it is admitted and runs with the platform's restrictions it carries."""
    sb = platform_sandbox
    owner = next(m for m in sb.members if m.namespace != sb.member(0).namespace)
    source = sb.admin.get(TJ, "ClusterTrainingRuntime", CATALOG_RUNTIME)
    mine = member_runtime(source, owner.namespace, unique("mine"), {})
    owner.client().create(mine)
    try:
        job = script_trainjob(owner, unique("onmine"), 1, CREDENTIALS, {})
        job["spec"]["runtimeRef"] = {
            "name": mine["metadata"]["name"],
            "apiGroup": RUNTIME[0].split("/")[0],
            "kind": RUNTIME[1],
        }
        ran = _lines(_run(sb, owner, job))
        _delete(sb, owner.namespace, job["metadata"]["name"])
    finally:
        sb.admin.delete(*RUNTIME, mine["metadata"]["name"], owner.namespace)
    assert {k: ran.get(k) for k in RESTRICTED} == RESTRICTED, ran


# -- 4. quota held by pods that never get ready ---------------------------------------------------------------

#: an image the mirror never got: on the mirror's own host, so the pull fails at once (the registry's "not found")
NEVER_PUBLISHED = f"{MIRROR}/kubeflow/trainer/never-published:v0"
LQ = ("kueue.x-k8s.io/v1beta2", "LocalQueue")


@dataclass
class NeverReady:
    """Attack 4's job: its member, name, the ClusterQueue behind the member's queue, its Workload once admitted."""

    member: Member
    name: str
    cluster_queue: str
    admitted: Obj
    submitted: float


@pytest.fixture(scope="module", autouse=True)
def never_ready(platform_sandbox: RunningSandbox) -> Iterator[NeverReady]:
    """Submitted before the module's first test: the timeout runs while the other attacks do."""
    sb = platform_sandbox
    member = sb.member(1)
    ns, name = member.namespace, unique("neverready")
    job = script_trainjob(member, name, 1, "print('never runs')", {})
    job["spec"]["trainer"]["image"] = NEVER_PUBLISHED
    submitted = time.monotonic()
    member.client().create(job)
    try:
        admitted = wait_admitted(sb.admin, ns, name, 120, " (before its pull fails)")
        cq = str(sb.admin.get(*LQ, member.queue, ns)["spec"]["clusterQueue"])
        yield NeverReady(member, name, cq, admitted, submitted)
    finally:
        _delete(sb, ns, name)


def _gpus_reserved(sb: RunningSandbox, cq: str) -> int:
    return sum(
        int(res.get("total", 0))
        for flavor in sb.admin.get(*CQ, cq).get("status", {}).get("flavorsReservation", [])
        for res in flavor["resources"]
        if res["name"] == GPU
    )


def test_attack4_a_job_whose_pods_never_get_ready_gives_its_teams_gpus_back(
    platform_sandbox: RunningSandbox, never_ready: NeverReady
) -> None:
    """Last in the module: by now the other attacks' jobs are deleted, so the team's ClusterQueue reserves GPUs for
    this job alone."""
    sb, job = platform_sandbox, never_ready
    ns, name = job.member.namespace, job.name

    def evicted() -> dict[str, Any] | None:
        for c in (workload_of(sb.admin, ns, name) or {}).get("status", {}).get("conditions", []):
            if c["type"] == "Evicted" and c["status"] == "True":
                return dict(c)
        return None

    assert evicted() is None, "evicted before this test: the module's other tests took longer than the timeout"

    def pull_failed() -> dict[str, Any] | None:
        pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        for pod in pods:
            assert pod["spec"].get("nodeName") == sb.node, pod["spec"].get("nodeName")
            for status in pod["status"].get("containerStatuses", []):
                assert "running" not in status["state"] and "terminated" not in status["state"], status
                if status["state"]["waiting"].get("reason") in ("ErrImagePull", "ImagePullBackOff"):
                    return dict(status["state"]["waiting"])
        return None

    waiting = wait_for(f"the kubelet to fail pulling {NEVER_PUBLISHED}", pull_failed, 120)
    print(f"\n[attacks] {ns}/{name}: {waiting}", flush=True)
    assert NEVER_PUBLISHED in waiting.get("message", ""), waiting
    assert _gpus_reserved(sb, job.cluster_queue) >= 1, sb.admin.get(*CQ, job.cluster_queue).get("status")

    timeout = duration_seconds(PODS_READY_TIMEOUT)
    left = timeout - (time.monotonic() - job.submitted)
    cond = wait_for(f"Kueue to evict {ns}/{name} after {PODS_READY_TIMEOUT}", evicted, left + 120)
    assert cond["reason"] == "PodsReadyTimeout", cond
    # not before the timeout: the eviction counts from the admission (the API's times are in whole seconds)
    conditions = job.admitted["status"]["conditions"]
    admitted_at = next(c for c in conditions if c["type"] == "Admitted")["lastTransitionTime"]
    assert _elapsed(admitted_at, cond["lastTransitionTime"]) >= timeout - 1, (admitted_at, cond)

    def released() -> bool:
        wl = workload_of(sb.admin, ns, name) or {}
        pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        return not pods and not has_condition(wl, "QuotaReserved") and _gpus_reserved(sb, job.cluster_queue) == 0

    # Kueue suspends the TrainJob, JobSet deletes its Job, the kubelet ends the pod, then the reservation goes
    wait_for(f"{ns}/{name}'s pod to end and its GPUs to be free", released, 120)
    requeue = (workload_of(sb.admin, ns, name) or {}).get("status", {}).get("requeueState", {})
    assert requeue.get("count") == 1 and requeue.get("requeueAt"), requeue  # it gets another chance later
    sb.times["attack 4: never-ready job evicted, GPUs back"] = round(time.monotonic() - job.submitted, 1)


def _elapsed(start: str, end: str) -> float:
    """Seconds between two of the API's RFC 3339 times."""
    times = [datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ") for t in (start, end)]
    return (times[1] - times[0]).total_seconds()
