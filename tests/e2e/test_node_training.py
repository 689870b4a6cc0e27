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
import time
from typing import Any

import pytest

from tests.e2e.kube import KubeClient, wait_for
from tests.e2e.node_session import GPU, TRAINER_ID, NodePlatform, NodeSession, acl
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
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    session, env = node_session, node_platform
    admin = session.sandbox.client
    team: Team = env.platform.render_teams()[0]
    ns = team.namespace
    labels = admin.get("v1", "Namespace", ns)["metadata"]["labels"]
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels

    sdk = TrainerClient(
        backend_config=KubernetesBackendConfig(
            namespace=ns, config_file=str(session.sandbox.user_kubeconfig(team.user, team.groups))
        )
    )
    start = time.monotonic()
    name = sdk.train(
        runtime=sdk.get_runtime(RUNTIME),
        trainer=CustomTrainer(
            func=train_linear_model,
            num_nodes=NUM_NODES,
            resources_per_node={"gpu": 1, "cpu": "500m", "memory": "2Gi"},
        ),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": team.queue})],
    )
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: _finished(admin, ns, name), 900)
    session.times["TrainJob created → finished"] = round(time.monotonic() - start, 1)
    pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    logs = {p["metadata"]["name"]: admin.log(p["metadata"]["name"], ns) for p in pods}
    for pod_name, log in sorted(logs.items()):
        print(f"\n[node training] log of {pod_name}:\n{log}", flush=True)
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions.get("Complete") == "True", (job["status"], logs)

    # Kueue admitted it through the team's queue onto the flavor of the real node's pool
    workloads = admin.list("kueue.x-k8s.io/v1beta2", "Workload", ns)
    wl = next(w for w in workloads if any(o["name"] == name for o in w["metadata"].get("ownerReferences", [])))
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

    # the quota is free again
    wait_for(f"{cq}'s GPUs to be released", lambda: _gpus_reserved(admin, cq) == 0, 60)
