"""A data scientist's job trains on the real node (issue #28: items 4, 5 first bullet, 6).

A stack rendered for this node (the `local` stack with its GPU pool replaced by a `static` pool naming the real
node, the `existing` storage backend, `podSecurity: restricted` for the first team, the images through
`images.registryMirror`) is applied to a sandbox with the real controllers; a team member calls the kubeflow SDK's
``TrainerClient().train()`` with a function on `torch-distributed`. Everything asserted comes from what ran: the
pods' logs (torchrun, gloo, loss per step per rank), the checkpoint on the host directory backing the team's
claim, exit codes, image IDs from the mirror, the Workload's admission.

What is not real: the GPUs (the node advertises ``nvidia.com/gpu`` by a status patch; torch runs on the CPU), the
image (a CPU stand-in from Debian's python3-torch 1.13, tests/e2e/runtime_images.py) and the storage class (a host
directory as the export, see ``node_session.prepare_export``). Cluster DNS is CoreDNS as a pod, Services go through
kube-proxy, the team's NetworkPolicies are enforced by kube-router (tests/e2e/node_session.py).
Opt-in like the real node: ``E2E_NODE=1`` as root (``make e2e-node``).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kube import KubeClient, wait_for
from tests.e2e.node_session import GPU, MAX_RESTARTS, TRAINER_ID, NodePlatform, NodeSession, acl
from tests.e2e.platform import Team

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_NODE") != "1", reason="the real node is opt-in: make e2e-node (E2E_NODE=1)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the real node needs root (containerd, runc, mounts, cgroups)"),
]

Obj = dict[str, Any]
NUM_NODES = 2
RUNTIME = "torch-distributed"
TJ = "trainer.kubeflow.org/v1alpha1"


# -- the training function (the SDK ships its source to the trainer container) --------------------------------


def train_linear_model() -> None:
    import os

    import torch  # type: ignore[import-not-found]
    import torch.distributed as dist  # type: ignore[import-not-found]

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    def say(line: str) -> None:  # one write per line: the ranks of a pod share its stdout
        print(line + "\n", end="", flush=True)

    say(f"rank {rank} of {world}: torch {torch.__version__} backend {dist.get_backend()} uid {os.getuid()}")
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    x = torch.linspace(-1, 1, 64).unsqueeze(1)[rank::world]
    y = 3 * x + 1
    for step in range(10):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        say(f"rank {rank} step {step} loss {loss.item():.6f}")
    if rank == 0:
        path = os.path.join(os.environ["CHECKPOINT_DIR"], "model.pt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save({"step": step, "model": model.module.state_dict()}, path)
        say(f"rank 0 wrote checkpoint {path}")
    dist.destroy_process_group()


# -- the scenario ----------------------------------------------------------------------------------------------

#: unanchored: two ranks share the container's stdout, so one line may end where the next begins
STEP = re.compile(r"rank (\d+) step (\d+) loss (\d+\.\d{6})")


def _finished(admin: KubeClient, ns: str, name: str) -> Obj | None:
    job = admin.get(TJ, "TrainJob", name, ns)
    done = [c for c in job.get("status", {}).get("conditions", []) if c["type"] in ("Complete", "Failed")]
    return job if any(c["status"] == "True" for c in done) else None


def _train(session: NodeSession, team: Team, func: Callable[[], None], nodes: int, memory: str) -> tuple[Any, str]:
    """``team``'s member submits ``func`` with the SDK on the catalog's torch runtime, through the team's queue,
    one (advertised) GPU, half a CPU and ``memory`` (requests = limits, as the SDK sets them) per node."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    kubeconfig = session.sandbox.user_kubeconfig(team.user, team.groups)
    sdk = TrainerClient(backend_config=KubernetesBackendConfig(namespace=team.namespace, config_file=str(kubeconfig)))
    name = sdk.train(
        runtime=sdk.get_runtime(RUNTIME),
        trainer=CustomTrainer(
            func=func, num_nodes=nodes, resources_per_node={"gpu": 1, "cpu": "500m", "memory": memory}
        ),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": team.queue})],
    )
    return sdk, name


def _assert_quota_released(admin: KubeClient, team: Team, name: str) -> None:
    """The TrainJob's Workload is finished and its ClusterQueue reserves no GPU any more."""
    cq = admin.get("kueue.x-k8s.io/v1beta2", "LocalQueue", team.queue, team.namespace)["spec"]["clusterQueue"]
    wait_for(f"{cq}'s GPUs to be released", lambda: _gpus_reserved(admin, cq) == 0, 60)
    wl = _workload(admin, team.namespace, name)
    finished = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
    assert finished and finished[0]["status"] == "True", wl["status"]


def _workload(admin: KubeClient, ns: str, name: str) -> Obj:
    workloads = admin.list("kueue.x-k8s.io/v1beta2", "Workload", ns)
    return next(w for w in workloads if any(o["name"] == name for o in w["metadata"].get("ownerReferences", [])))


def _gpus_reserved(admin: KubeClient, cluster_queue: str) -> int:
    usage = admin.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", cluster_queue).get("status", {})
    return sum(
        int(r.get("total", "0"))
        for f in usage.get("flavorsReservation", [])
        for r in f.get("resources", [])
        if r["name"] == GPU
    )


def test_team_member_trains_with_the_sdk_on_the_real_node(
    node_session: NodeSession, node_platform: NodePlatform
) -> None:
    session, env = node_session, node_platform
    admin = session.sandbox.client
    team: Team = env.platform.render_teams()[0]
    ns = team.namespace
    labels = admin.get("v1", "Namespace", ns)["metadata"]["labels"]
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels

    start = time.monotonic()
    sdk, name = _train(session, team, train_linear_model, NUM_NODES, "2Gi")
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: _finished(admin, ns, name), 900)
    session.times["TrainJob created → finished"] = round(time.monotonic() - start, 1)
    pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    logs = {p["metadata"]["name"]: admin.log(p["metadata"]["name"], ns) for p in pods}
    for pod_name, log in sorted(logs.items()):
        print(f"\n[node training] log of {pod_name}:\n{log}", flush=True)
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions.get("Complete") == "True", (job["status"], logs)

    # Kueue admitted it through the team's queue onto the flavor of the real node's pool
    wl = _workload(admin, ns, name)
    cq = admin.get("kueue.x-k8s.io/v1beta2", "LocalQueue", team.queue, ns)["spec"]["clusterQueue"]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == cq
    flavors = {f for ps in admission["podSetAssignments"] for f in ps["flavors"].values()}
    flavor = admin.get("kueue.x-k8s.io/v1beta2", "ResourceFlavor", flavors.pop())
    real = admin.get("v1", "Node", session.node.name)
    assert all(real["metadata"]["labels"].get(k) == v for k, v in flavor["spec"]["nodeLabels"].items())

    # both pods ran on the real node, from the mirror's image, as uid 1000, and exited 0
    assert len(pods) == NUM_NODES, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["nodeName"] == session.node.name
        status = pod["status"]["containerStatuses"][0]
        assert status["state"]["terminated"]["exitCode"] == 0, status
        assert status["image"] == env.torch_ref
        session.assert_ran_from_mirror(pod)
        assert pod["spec"]["securityContext"]["runAsUser"] == TRAINER_ID

    # torchrun with gloo: every rank of every node trained, its loss fell
    text = "\n".join(logs.values())
    world = {int(w) for w in re.findall(r"rank \d+ of (\d+): torch \S+ backend gloo uid 1000", text)}
    assert len(world) == 1 and world.pop() >= NUM_NODES, text
    losses: dict[int, list[float]] = {}
    for rank, _, loss in STEP.findall(text):
        losses.setdefault(int(rank), []).append(float(loss))
    assert len(losses) >= NUM_NODES, losses
    for rank, values in losses.items():
        assert len(values) == 10 and values[-1] < values[0] / 4, (rank, values)
    sdk_logs = "\n".join(sdk.get_job_logs(name))
    assert "rank 0 wrote checkpoint" in sdk_logs, sdk_logs

    # the checkpoint is on the team's volume, in the TrainJob's directory the kubelet made (subPathExpr)
    job_dir = env.exports / ns / "workspace" / "jobs" / name
    checkpoint = job_dir / "checkpoints" / "model.pt"
    assert checkpoint.is_file(), sorted(str(p) for p in env.exports.rglob("*"))
    assert checkpoint.stat().st_uid == TRAINER_ID
    assert checkpoint.read_bytes()[:2] == b"PK"  # torch.save's zip format
    assert "rank 0 wrote checkpoint /workspace/checkpoints/model.pt" in text
    # ... which only the ACL it inherited from the export lets uid 1000 write: the kubelet made it root's (group
    # root, not writable by others), and the trainer, uid 1000 without capabilities, wrote in it
    made = job_dir.stat()
    assert (made.st_uid, made.st_gid, made.st_mode & 0o002) == (0, 0, 0), (made.st_uid, made.st_gid, oct(made.st_mode))
    assert os.getxattr(job_dir, "system.posix_acl_access") == acl(TRAINER_ID, TRAINER_ID)

    _assert_quota_released(admin, team, name)


# -- resume: a rank killed from outside, the JobSet restarted, training continued from the checkpoint -----------


def train_resumable() -> None:
    """20 steps of one second; rank 0 checkpoints every step (written aside, then renamed: a kill never leaves
    half a file); every rank starts from the checkpoint when there is one."""
    import os
    import time

    import torch
    import torch.distributed as dist

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


def _rank_process(session: NodeSession, pod: Obj, rank: int) -> int:
    """The host PID of rank ``rank``'s python process in ``pod``'s container: one of the container's processes
    (containerd's task listing), the one whose environment torchrun gave ``RANK=<rank>``."""
    container = pod["status"]["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    listing = session.node.ctr("tasks", "ps", container)
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
    node_session: NodeSession, node_platform: NodePlatform
) -> None:
    session, env = node_session, node_platform
    admin = session.sandbox.client
    team: Team = env.platform.render_teams()[0]
    ns = team.namespace
    start = time.monotonic()
    _, name = _train(session, team, train_resumable, NUM_NODES, "2Gi")
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
    pid = _rank_process(session, first, 0)
    status = Path(f"/proc/{pid}/status").read_text()
    in_container = next(line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:"))
    killed_log = admin.log(first["metadata"]["name"], ns)
    os.kill(pid, signal.SIGKILL)
    session.times["resume: submit → rank 0 killed at step ≥ 3"] = round(time.monotonic() - start, 1)
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: _finished(admin, ns, name), 600)
    session.times["resume: submit → Complete after the restart"] = round(time.monotonic() - start, 1)

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
    checkpoint = env.exports / ns / "workspace" / "jobs" / name / "checkpoints" / "resume.pt"
    assert checkpoint.is_file() and not checkpoint.with_name("resume.pt.new").exists()
    for pod in pods:
        session.assert_ran_from_mirror(pod)
    _assert_quota_released(admin, team, name)


# -- OOM: a job over its memory limit ----------------------------------------------------------------------------


def exceed_memory() -> None:
    """Allocate (and touch) 64 MiB at a time, far past the container's limit."""
    hog = []
    for size in range(64):
        hog.append(b"x" * (64 << 20))
        print(f"holding {(size + 1) * 64} MiB\n", end="", flush=True)


def test_a_job_over_its_memory_limit_is_oom_killed_reported_and_its_quota_released(
    node_session: NodeSession, node_platform: NodePlatform
) -> None:
    session, env = node_session, node_platform
    admin = session.sandbox.client
    team: Team = env.platform.render_teams()[0]
    ns = team.namespace
    start = time.monotonic()
    _, name = _train(session, team, exceed_memory, 1, "1Gi")
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: _finished(admin, ns, name), 600)
    session.times["OOM: submit → TrainJob Failed"] = round(time.monotonic() - start, 1)
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
        session.assert_ran_from_mirror(pod)
    # ... the JobSet restarted it as often as the policy allows, then failed, and so did the TrainJob
    jobset = admin.get("jobset.x-k8s.io/v1alpha2", "JobSet", name, ns)
    assert jobset["status"].get("restarts") == MAX_RESTARTS, jobset["status"]
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    print(f"\n[node training] OOM TrainJob condition: {failed}", flush=True)
    assert failed["status"] == "True", job["status"]
    _assert_quota_released(admin, team, name)
