"""A member's job in the queue, on the platform the real ``pulumi up`` installed on the real node (the sandbox
session, tests/e2e/sandbox_session.py): where it waits and why (Kueue's visibility API and the Workload's
conditions, read as the member), a job preempted by a higher priority that checkpoints on SIGTERM and resumes where
it stopped, and a job's directory that no other job can take.

The member (the ``restricted`` team's, kubeconfig from sandbox.json) submits with the kubeflow SDK on the catalog's
``torch-distributed`` and reads with their own credentials; the admin only reads the checkpoint's history from the
host directory behind the team's claim. The sandbox's teams share a cohort of the node's 8 (advertised) GPUs: a
job that takes all 8 leaves nothing to borrow, so a high-priority job of the same team must preempt it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from tests.e2e.test_sandbox_up import KUEUE, TJ, finished, workload
from trainer_infra.catalog.fault_tolerance import GRACE_SECONDS
from trainer_infra.core.upstream.kueue import QUEUE_LABEL, VISIBILITY_GROUP
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.platform_sandbox import NODE_GPUS

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
RUNTIME = "torch-distributed"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: the first run trains until it is preempted (at most this many steps); the resumed run this many more
MAX_STEPS, RESUMED_STEPS = 900, 5
HISTORY = "history.log"


def _sdk(member: Member) -> Any:
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient

    return TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=member.namespace, config_file=member.kubeconfig)
    )


def _train(member: Member, func: Callable[[], None], priority: str, resources: dict[str, Any]) -> str:
    """``member`` submits ``func`` on one node through the team's queue at WorkloadPriorityClass ``priority``."""
    from kubeflow.trainer import CustomTrainer
    from kubeflow.trainer.options import Labels

    sdk = _sdk(member)
    name: str = sdk.train(
        runtime=sdk.get_runtime(RUNTIME),
        trainer=CustomTrainer(func=func, num_nodes=1, resources_per_node=resources),
        options=[Labels(labels={QUEUE_LABEL: member.queue, PRIORITY_LABEL: priority})],
    )
    return name


def train_until_preempted() -> None:
    """Steps of a second until preempted (at most 900); on SIGTERM rank 0 writes its checkpoint at the step it
    reached and stops (what the grace period is for); a run that starts from a checkpoint trains 5 more steps.
    `history.log` beside the checkpoint keeps what each run did. The SDK ships this function's source alone: it
    imports all it uses (without `os` here, every run failed at its first line)."""
    import os
    import signal
    import sys
    import time

    import torch  # type: ignore[import-not-found]

    class PreemptedError(Exception):
        pass

    def on_sigterm(signum: int, frame: object) -> None:
        raise PreemptedError()

    signal.signal(signal.SIGTERM, on_sigterm)
    rank = int(os.environ.get("RANK", "0"))
    path = os.path.join(os.environ["CHECKPOINT_DIR"], "model.pt")
    history = os.path.join(os.environ["CHECKPOINT_DIR"], "history.log")

    def note(line: str) -> None:
        print(f"rank {rank} {line}\n", end="", flush=True)
        if rank == 0:
            with open(history, "a") as out:
                out.write(line + "\n")

    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    first = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        first = state["step"] + 1
    if rank == 0:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    note(f"starts at step {first}")
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    done = first - 1
    last = first + 5 if first else 900
    try:
        for step in range(first, last):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), 3 * x + 1)
            loss.backward()
            optimizer.step()
            done = step
            print(f"rank {rank} step {step} loss {loss.item():.6f}\n", end="", flush=True)
            time.sleep(1)
    except PreemptedError:
        if rank == 0:
            torch.save({"step": done, "model": model.state_dict()}, path + ".new")
            os.replace(path + ".new", path)
        note(f"got SIGTERM after step {done}: checkpoint written")
        sys.exit(143)
    if rank == 0:
        torch.save({"step": done, "model": model.state_dict()}, path)
    note("finished")


def say_done() -> None:
    print("high-priority work done\n", end="", flush=True)


def _positions(client: KubeClient, member: Member) -> dict[str, int]:
    """Workload name → position in the member's LocalQueue, from Kueue's visibility API (as `kubectl get --raw`)."""
    path = f"/apis/{VISIBILITY_GROUP}/v1beta2/namespaces/{member.namespace}/localqueues/{member.queue}/pendingworkloads"
    answer = client.request("GET", path)
    assert answer["kind"] == "PendingWorkloadsSummary", answer
    return {w["metadata"]["name"]: int(w["positionInLocalQueue"]) for w in answer["items"]}


def _listing(client: KubeClient, member: Member, workloads: list[str]) -> dict[str, int] | None:
    """The positions once every one of ``workloads`` is listed."""
    positions = _positions(client, member)
    return positions if set(workloads) <= set(positions) else None


def _condition(wl: Obj, kind: str) -> Obj | None:
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _gpu_holders(admin: KubeClient, sb: RunningSandbox) -> list[str]:
    """The admitted, unfinished Workloads of every team (``namespace/name``): what holds the cohort's quota."""
    held = []
    for ns in sorted({m.namespace for m in sb.members}):
        for wl in admin.list(KUEUE, "Workload", ns):
            admitted, done = _condition(wl, "Admitted"), _condition(wl, "Finished")
            if admitted and admitted["status"] == "True" and not (done and done["status"] == "True"):
                held.append(f"{ns}/{wl['metadata']['name']}")
    return held


def _own_workload(client: KubeClient, member: Member, name: str) -> Obj | None:
    for wl in client.list(KUEUE, "Workload", member.namespace):
        if any(o["name"] == name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def _pending_because(client: KubeClient, member: Member, name: str, words: str) -> Obj | None:
    wl = _own_workload(client, member, name)
    reserved = _condition(wl, "QuotaReserved") if wl else None
    return wl if reserved and reserved["status"] == "False" and words in reserved["message"] else None


def _waiting(client: KubeClient, member: Member, name: str) -> Obj | None:
    wl = _own_workload(client, member, name)
    reserved = _condition(wl, "QuotaReserved") if wl else None
    return wl if wl is not None and (reserved is None or reserved["status"] == "False") else None


def test_a_member_cannot_take_another_jobs_directory(platform_sandbox: RunningSandbox) -> None:
    """The issue's attack: a TrainJob whose TRAIN_JOB_NAME names another job of the team. Refused at submit, with
    the reason; nothing is created."""
    member = platform_sandbox.member(0)
    me = member.client()
    victim = next(iter(j["metadata"]["name"] for j in me.list(TJ, "TrainJob", member.namespace)), "first-job")
    attack: Obj = {
        "apiVersion": TJ,
        "kind": "TrainJob",
        "metadata": {"name": "thief", "namespace": member.namespace, "labels": {QUEUE_LABEL: member.queue}},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "trainer": {
                "command": ["sh", "-c", "ls $CHECKPOINT_DIR"],
                "env": [{"name": "TRAIN_JOB_NAME", "value": victim}],
            },
        },
    }
    with pytest.raises(ApiError) as refused:
        me.create(attack)
    print(f"\n[queue] TRAIN_JOB_NAME={victim} refused: {refused.value.message}", flush=True)
    assert refused.value.status in (403, 422) and "spec.trainer.env sets TRAIN_JOB_NAME" in refused.value.message
    # the other route: a runtime patch that mounts another directory of the claim where the job's own goes
    attack["spec"]["trainer"].pop("env")
    mount = {"name": "initializer", "mountPath": "/workspace", "subPath": f"jobs/{victim}"}
    patch = {
        "name": "node",
        "template": {"spec": {"template": {"spec": {"containers": [{"name": "node", "volumeMounts": [mount]}]}}}},
    }
    attack["spec"]["runtimePatches"] = [
        {"manager": "example.com/thief", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [patch]}}}}
    ]
    with pytest.raises(ApiError) as refused:
        me.create(attack)
    print(f"[queue] subPath jobs/{victim} at /workspace refused: {refused.value.message}", flush=True)
    assert "other than the job's own directory" in refused.value.message
    assert not me.exists(TJ, "TrainJob", "thief", member.namespace)


def test_a_preempted_job_checkpoints_on_sigterm_and_resumes_where_it_stopped(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    member = sb.member(0)
    me = member.client()
    ns = member.namespace
    start = time.monotonic()
    cq = me.get(KUEUE, "LocalQueue", member.queue, ns)["spec"]["clusterQueue"]
    print(f"\n[queue] {member.user} in {ns}, LocalQueue {member.queue} → ClusterQueue {cq}", flush=True)

    # the cohort's GPUs free first: an earlier file's job still admitted would keep the low job waiting
    wait_for("every admitted job of the earlier files to end", lambda: not _gpu_holders(sb.admin, sb), 240)
    # a low-priority job that takes every GPU of the cohort (its team's and the other team's, borrowed)
    low = _train(member, train_until_preempted, "low", {"gpu": NODE_GPUS, "cpu": "500m", "memory": "1Gi"})
    selector = f"jobset.sigs.k8s.io/jobset-name={low}"

    def low_running_at_step_3() -> Obj | None:
        for pod in me.list("v1", "Pod", ns, label_selector=selector):
            if pod["status"].get("phase") == "Running" and "rank 0 step 3 " in me.log(pod["metadata"]["name"], ns):
                return pod
        return None

    try:
        first_pod = wait_for(f"{low} to train to step 3", low_running_at_step_3, 300)
    except TimeoutError as exc:
        wl = _own_workload(me, member, low)
        pods = me.list("v1", "Pod", ns, label_selector=selector)
        raise TimeoutError(
            f"{exc}; its Workload's conditions: {wl and wl.get('status', {}).get('conditions')}; "
            f"admitted Workloads holding quota: {_gpu_holders(sb.admin, sb)}; its pods: "
            f"{[(p['metadata']['name'], p['status'].get('phase')) for p in pods]}"
        ) from None
    sb.times["preemption: submit → low job at step 3"] = round(time.monotonic() - start, 1)
    # the grace period every pod of the runtime has (runtimes.faultTolerance.terminationGracePeriodSeconds)
    assert first_pod["spec"]["terminationGracePeriodSeconds"] == GRACE_SECONDS, first_pod["spec"]

    # -- place in the queue and why: two more jobs of the same priority wait (no quota left), in order --------
    waiting = [_train(member, say_done, "low", {"gpu": 1, "cpu": "250m", "memory": "512Mi"})]
    # the queue's head is tried and told why; the one behind it waits its turn (pending, no quota)
    head = wait_for(
        f"{waiting[0]} to wait for quota",
        lambda: _pending_because(me, member, waiting[0], "insufficient unused quota"),
        60,
    )
    print(f"[queue] {waiting[0]} over quota: QuotaReserved {_condition(head, 'QuotaReserved')}", flush=True)
    # Kueue orders one priority by creation time, in whole seconds, then by UID (Kueue 0.19.2
    # pkg/cache/queue/cluster_queue.go baseCompareFunc): the second job comes a second later to be second
    time.sleep(1.5)
    waiting.append(_train(member, say_done, "low", {"gpu": 1, "cpu": "250m", "memory": "512Mi"}))
    # the one behind it has a Workload without quota (Kueue may not try it before the head: no condition yet)
    behind = wait_for(f"{waiting[1]}'s Workload, without quota", lambda: _waiting(me, member, waiting[1]), 60)
    print(f"[queue] {waiting[1]} behind it: QuotaReserved {_condition(behind, 'QuotaReserved')}", flush=True)
    workloads = [workload(me, ns, n)["metadata"]["name"] for n in waiting]
    positions = wait_for("the visibility API to list both", lambda: _listing(me, member, workloads), 60)
    print(f"[queue] positions in {member.queue} (visibility API, as {member.user}): {positions}", flush=True)
    assert [positions[w] for w in workloads] == [0, 1], positions
    # ... a job asking for a GPU kind no flavor of the queue offers is inadmissible, however long it waits
    odd = _train(member, say_done, "low", {"mig-1g.10gb": 1, "cpu": "250m", "memory": "512Mi"})
    wl = wait_for(
        f"{odd} to be inadmissible", lambda: _pending_because(me, member, odd, "unavailable in ClusterQueue"), 60
    )
    print(f"[queue] {odd} inadmissible: QuotaReserved {_condition(wl, 'QuotaReserved')}", flush=True)
    sdk = _sdk(member)
    for name in [*waiting, odd]:
        sdk.delete_job(name)

    # -- preemption: a high-priority job of the same team takes the quota -------------------------------------
    high = _train(member, say_done, "high", {"gpu": 1, "cpu": "250m", "memory": "512Mi"})
    preempted_at = time.monotonic()

    def evicted() -> Obj | None:
        wl = _own_workload(me, member, low)
        cond = _condition(wl, "Evicted") if wl else None
        return wl if cond and cond["status"] == "True" else None

    wl = wait_for(f"{low} to be preempted", evicted, 120)
    print(
        f"[queue] {low} preempted: Evicted {_condition(wl, 'Evicted')}; Preempted {_condition(wl, 'Preempted')}",
        flush=True,
    )
    assert (_condition(wl, "Evicted") or {}).get("reason") == "Preempted", wl["status"]
    requeued = wait_for(f"{low} to wait again", lambda: _listing(me, member, [wl["metadata"]["name"]]), 180)
    print(f"[queue] while {high} runs, positions: {requeued}", flush=True)
    wait_for(f"{high} to finish", lambda: finished(me, ns, high), 300)
    sb.times["preemption: high job submitted → Complete"] = round(time.monotonic() - preempted_at, 1)

    # -- re-admitted, the low job resumes from the checkpoint its SIGTERM handler wrote --------------------------
    job = wait_for(f"{low} to finish after re-admission", lambda: finished(me, ns, low), 600)
    sb.times["preemption: submit → low job Complete after resuming"] = round(time.monotonic() - start, 1)
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"]), job["status"]
    history = (sb.host_directory(ns) / "jobs" / low / "checkpoints" / HISTORY).read_text().splitlines()
    print(f"[queue] {low}'s {HISTORY}: {history}", flush=True)
    stopped = next(line for line in history if line.startswith("got SIGTERM"))
    reached = int(stopped.split()[4].rstrip(":"))
    assert reached >= 3, history
    assert history == ["starts at step 0", stopped, f"starts at step {reached + 1}", "finished"], history
    pods = me.list("v1", "Pod", ns, label_selector=selector)
    logs = "\n".join(me.log(p["metadata"]["name"], ns) for p in pods)
    steps = {int(line.split()[3]) for line in logs.splitlines() if line.startswith("rank 0 step ")}
    assert steps == set(range(reached + 1, reached + 1 + RESUMED_STEPS)), (reached, sorted(steps))

    # -- what the member reads about it: the TrainJob's events (`kubectl events --for trainjob/<name>`), the SDK's --
    kueue_said = [
        (e["reason"], e.get("message", ""))
        for e in me.list("v1", "Event", ns, field_selector=f"involvedObject.name={low}")
        if e["involvedObject"]["kind"] == "TrainJob"
    ]
    print(f"[queue] events of TrainJob {low}:\n" + "\n".join(f"  {r}: {m}" for r, m in kueue_said), flush=True)
    assert any(r == "Stopped" and m.startswith("Preempted to accommodate") for r, m in kueue_said), kueue_said
    sdk_said = [(e.involved_object_kind, e.reason, e.message) for e in sdk.get_job_events(low)]
    print(f"[queue] get_job_events({low}):\n" + "\n".join(f"  {k} {r}: {m}" for k, r, m in sdk_said), flush=True)
