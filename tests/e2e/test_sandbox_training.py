"""A team member's training survives a killed rank and a job over its memory limit fails cleanly, on the platform
the real ``pulumi up`` installed on the real node (issue #28 item 5; the sandbox session, tests/e2e/sandbox_session.py).

The member (the ``restricted`` team's, with the kubeconfig sandbox.json names) submits functions with the kubeflow
SDK's ``TrainerClient().train()`` on the catalog's ``torch-distributed``; the sandbox stack's failure policy
(``runtimes.faultTolerance.maxRestarts: 1``) restarts a failed JobSet once. Everything asserted comes from what ran:
the pods' logs, the process killed from outside, the checkpoint on the host directory backing the team's claim,
the container's OOM kill, the Workload and the ClusterQueue's reservation.

What is not real: the GPUs (advertised), the image (a CPU stand-in from Debian's python3-torch 1.13,
sandbox/runtime_images.py) and the storage class (a host directory as the export). The SDK's first job (2 nodes,
checkpoint) is test_sandbox_up.py's.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from tests.e2e.test_sandbox_up import assert_quota_released, finished
from trainer_infra.sandbox.first_job import STEP
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.platform_sandbox import MAX_RESTARTS

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
NUM_NODES = 2
RUNTIME = "torch-distributed"


def _train(member: Member, func: Callable[[], None], nodes: int, memory: str) -> str:
    """``member`` submits ``func`` with the SDK on the catalog's torch runtime, through the team's queue, one
    (advertised) GPU, half a CPU and ``memory`` (requests = limits, as the SDK sets them) per node."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    sdk = TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=member.namespace, config_file=member.kubeconfig)
    )
    name: str = sdk.train(
        runtime=sdk.get_runtime(RUNTIME),
        trainer=CustomTrainer(
            func=func, num_nodes=nodes, resources_per_node={"gpu": 1, "cpu": "500m", "memory": memory}
        ),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": member.queue})],
    )
    return name


# -- resume: a rank killed from outside, the JobSet restarted, training continued from the checkpoint -----------


def train_resumable() -> None:
    """20 steps of one second; rank 0 checkpoints every step (written aside, then renamed: a kill never leaves
    half a file); every rank starts from the checkpoint when there is one."""
    import os
    import time

    import torch  # type: ignore[import-not-found]
    import torch.distributed as dist  # type: ignore[import-not-found]

    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()

    def say(line: str) -> None:
        print(line + "\n", end="", flush=True)

    path = os.path.join(os.environ["CHECKPOINT_DIR"], "resume.pt")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    first = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        first = state["step"] + 1
    dist.barrier()  # every rank has read the checkpoint before rank 0 writes the next one
    say(f"rank {rank} pid {os.getpid()} starts at step {first}")
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    for step in range(first, 20):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), 3 * x + 1)
        loss.backward()
        optimizer.step()
        if rank == 0:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save({"step": step, "model": model.module.state_dict()}, path + ".new")
            os.replace(path + ".new", path)
        say(f"rank {rank} step {step} loss {loss.item():.6f}")
        time.sleep(1)
    say(f"rank {rank} finished")
    dist.destroy_process_group()


STARTS = re.compile(r"rank (\d+) pid (\d+) starts at step (\d+)")
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"


def _rank_process(sb: RunningSandbox, pod: Obj, rank: int) -> int:
    """The host PID of rank ``rank``'s python process in ``pod``'s container: one of the container's processes
    (containerd's task listing), the one whose environment torchrun gave ``RANK=<rank>``."""
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    listing = sb.ctr("tasks", "ps", container)
    assert listing.returncode == 0, listing.stderr
    for pid in (int(line.split()[0]) for line in listing.stdout.splitlines()[1:]):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return pid
    raise AssertionError(f"no process with RANK={rank} in {pod['metadata']['name']}: {listing.stdout}")


def test_a_killed_rank_is_restarted_by_the_failure_policy_and_resumes_from_the_checkpoint(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    admin = sb.admin
    member = sb.member(0)
    ns = member.namespace
    start = time.monotonic()
    name = _train(member, train_resumable, NUM_NODES, "2Gi")
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"

    def rank0_checkpointed() -> Obj | None:
        for pod in admin.list("v1", "Pod", ns, label_selector=f"{selector},batch.kubernetes.io/job-completion-index=0"):
            if pod["status"].get("phase") == "Running":
                steps = [int(s) for r, s, _ in STEP.findall(admin.log(pod["metadata"]["name"], ns)) if r == "0"]
                if steps and max(steps) >= 3:
                    return pod
        return None

    first = wait_for(f"rank 0 of {name} to checkpoint step 3", rank0_checkpointed, 300)
    # the kill comes from outside, as the kernel's or an operator's would: SIGKILL to the host process
    pid = _rank_process(sb, first, 0)
    status = Path(f"/proc/{pid}/status").read_text()
    in_container = next(line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:"))
    killed_log = admin.log(first["metadata"]["name"], ns)
    os.kill(pid, signal.SIGKILL)
    sb.times["resume: submit → rank 0 killed at step ≥ 3"] = round(time.monotonic() - start, 1)
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: finished(admin, ns, name), 600)
    sb.times["resume: submit → Complete after the restart"] = round(time.monotonic() - start, 1)

    # the JobSet's failurePolicy restarted it once (the catalog's; this stack allows MAX_RESTARTS), and it completed
    jobset = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, ns)
    policy = jobset["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == MAX_RESTARTS and policy["restartStrategy"] == "Recreate", policy
    assert jobset["status"].get("restarts") == 1, jobset["status"]
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions.get("Complete") == "True", job["status"]
    killed_steps = [int(s) for r, s, _ in STEP.findall(killed_log) if r == "0"]
    # the kill hit rank 0's process (its pid inside the container's PID namespace: the last of NSpid)
    assert f"rank 0 pid {in_container} starts at step 0" in killed_log, (in_container, killed_log)

    # the pods of the restart (attempt 1) started every rank from rank 0's checkpoint, and finished
    pods = admin.list("v1", "Pod", ns, label_selector=f"{selector},{RESTART_ATTEMPT}=1")
    logs = "\n".join(admin.log(p["metadata"]["name"], ns) for p in pods)
    print(f"\n[node training] after the kill at rank 0 step {max(killed_steps)}:\n{logs}", flush=True)
    starts = {int(rank): int(step) for rank, _, step in STARTS.findall(logs)}
    assert len(starts) >= NUM_NODES and len(set(starts.values())) == 1, starts
    resumed = starts[0]
    assert 0 < resumed <= max(killed_steps) + 1, (resumed, killed_steps)
    assert all(f"rank {r} finished" in logs for r in starts), logs
    # ... and trained the remaining steps only
    assert {int(s) for r, s, _ in STEP.findall(logs) if r == "0"} == set(range(resumed, 20)), logs
    checkpoint = sb.host_directory(ns) / "jobs" / name / "checkpoints" / "resume.pt"
    assert checkpoint.is_file() and not checkpoint.with_name("resume.pt.new").exists()
    for pod in pods:
        sb.assert_ran_from_mirror(pod)
    assert_quota_released(admin, member, name)


# -- OOM: a job over its memory limit ----------------------------------------------------------------------------


def exceed_memory() -> None:
    """Allocate (and touch) 64 MiB at a time, far past the container's limit."""
    hog = []
    for size in range(64):
        hog.append(b"x" * (64 << 20))
        print(f"holding {(size + 1) * 64} MiB\n", end="", flush=True)


def test_a_job_over_its_memory_limit_is_oom_killed_reported_and_its_quota_released(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    admin = sb.admin
    member = sb.member(0)
    ns = member.namespace
    start = time.monotonic()
    name = _train(member, exceed_memory, 1, "1Gi")
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: finished(admin, ns, name), 600)
    sb.times["OOM: submit → TrainJob Failed"] = round(time.monotonic() - start, 1)
    pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    for pod in pods:
        print(f"\n[node training] OOM pod {pod['metadata']['name']}: {pod['status']}", flush=True)

    # what the member sees: the pod's container OOMKilled (the kernel's cgroup v1 memory controller at the limit)
    # ... the container's limit was what the SDK asked for
    assert pods, name
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == "1Gi"
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert terminated["reason"] == "OOMKilled" and terminated["exitCode"] != 0, terminated
        sb.assert_ran_from_mirror(pod)
    # ... the JobSet restarted it as often as the policy allows, then failed, and so did the TrainJob
    jobset = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, ns)
    assert jobset["status"].get("restarts") == MAX_RESTARTS, jobset["status"]
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    print(f"\n[node training] OOM TrainJob condition: {failed}", flush=True)
    assert failed["status"] == "True", job["status"]
    assert_quota_released(admin, member, name)
