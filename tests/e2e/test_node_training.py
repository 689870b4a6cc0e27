"""A data scientist's job trains on the real node (issue #28: items 4, 5 first bullet, 6).

A stack rendered for this node (the `local` stack with its GPU pool replaced by a `static` pool naming the real
node, the `existing` storage backend, `podSecurity: restricted` for the first team, the images through
`images.registryMirror`) is applied to a sandbox with the real controllers; a team member calls the kubeflow SDK's
``TrainerClient().train()`` with a function on `torch-distributed`. Everything asserted comes from what ran: the
pods' logs (torchrun, gloo, loss per step per rank), the checkpoint on the host directory backing the team's
claim, exit codes, image IDs from the mirror, the Workload's admission.

What is not real: the GPUs (the node advertises ``nvidia.com/gpu`` by a status patch; torch runs on the CPU), the
image (a CPU stand-in from Debian's python3-torch 1.13, tests/e2e/runtime_images.py), cluster DNS (pod records only,
tests/e2e/pod_dns.py) and the storage class (a host directory as the export, see ``prepare_export``).
Opt-in like the real node: ``E2E_NODE=1`` as root (``make e2e-node``).
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import node as node_mod
from tests.e2e.build import Builder
from tests.e2e.chart_registry import ChartRegistry
from tests.e2e.kube import KubeClient, wait_for
from tests.e2e.node import RealNode, publish
from tests.e2e.oci_images import Image, pause_image
from tests.e2e.platform import Platform, Team, wait_admission_enforced
from tests.e2e.pod_dns import PodDns
from tests.e2e.render import RenderOutput, apply_render, controller_users, kueue_settings, render_stack
from tests.e2e.runtime_images import TORCH, stand_in_image
from tests.e2e.sandbox import Sandbox

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_NODE") != "1", reason="the real node is opt-in: make e2e-node (E2E_NODE=1)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the real node needs root (containerd, runc, mounts, cgroups)"),
]

Obj = dict[str, Any]
NODE = "e2e-node-0"
GPU = "nvidia.com/gpu"
#: GPUs the node claims to have (none is real)
NODE_GPUS = 8
NUM_NODES = 2
RUNTIME = "torch-distributed"
TJ = "trainer.kubeflow.org/v1alpha1"
#: the uid/gid the platform runs runtimes as (runtimes.securityContext defaults)
TRAINER_ID = 1000


def node_stack() -> dict[str, Any]:
    """Top-level keys over the `local` stack: its GPU pool becomes the real node (`static` backend, one block),
    quotas fit that node, claims come from an `existing` class, the first team is `restricted`."""
    import yaml

    from tests.e2e.versions import REPO_ROOT

    local = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.local.yaml").read_text())["config"]
    teams = local["trainer-platform:teams"]
    for team in teams:
        team["quota"] = {"h100": {"gpus": NODE_GPUS // len(teams)}}
    teams[0]["podSecurity"] = "restricted"
    components = local["trainer-platform:components"]
    # the first pull of the stand-in (≈ 450 MB) counts against waitForPodsReady
    components["kueue"]["waitForPodsReady"] = {"timeout": "10m"}
    return {
        "components": components,
        "images": {"registryMirror": node_mod.MIRROR},
        "nodePools": [
            {
                "name": "h100",
                "backend": "static",
                "node": {
                    "cpu": "2",
                    "memory": "16Gi",
                    "accelerator": {"count": NODE_GPUS, "product": "NVIDIA-H100-80GB-HBM3"},
                },
                "static": {
                    "nodes": [
                        {
                            "name": NODE,
                            "topology": {"trainer-platform.io/block": "b0", "trainer-platform.io/rack": "r0"},
                        }
                    ]
                },
            }
        ],
        "storage": {"existing": {"className": "e2e-host-directory"}},
        "dataCache": {"enabled": False},
        "runtimes": {"enabled": [RUNTIME]},
        "teams": teams,
    }


# -- the export ------------------------------------------------------------------------------------------------

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
ACL_UNDEFINED = 0xFFFFFFFF


def acl(uid: int, gid: int) -> bytes:
    """A POSIX ACL xattr (``system.posix_acl_access`` or ``_default``) for a root-owned 0755 directory plus
    ``u:<uid>:rwx,g:<gid>:rwx`` (mask rwx), as ``setfacl -m``/``setfacl -d -m`` write it."""
    entries = [
        (ACL_USER_OBJ, 7, ACL_UNDEFINED),
        (ACL_USER, 7, uid),
        (ACL_GROUP_OBJ, 5, ACL_UNDEFINED),
        (ACL_GROUP, 7, gid),
        (ACL_MASK, 7, ACL_UNDEFINED),
        (ACL_OTHER, 5, ACL_UNDEFINED),
    ]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def prepare_export(path: Path) -> None:
    """A team's directory as an NFS export comes: root's, mode 0755. The kubelet creates ``jobs/<trainjob>`` in it
    itself (``subPathExpr``), as root, passing the root's mode to mkdir, so uid 1000 could not write its script or
    checkpoint there. The fix an admin applies (docs/storage.md): ``setfacl -m u:1000:rwx,g:1000:rwx`` and the same
    as a default ACL (``-d``). The default entries are inherited by every directory created inside, whoever creates
    it; the access entries raise the root's group bits (the ACL mask) to rwx, and the kubelet passes those bits on as
    the new directory's mask (with 0755 the inherited entries would be masked down to r-x)."""
    path.mkdir(parents=True)
    os.chown(path, 0, 0)
    path.chmod(0o755)
    for kind in ("access", "default"):
        os.setxattr(path, f"system.posix_acl_{kind}", acl(TRAINER_ID, TRAINER_ID))


# -- the session -----------------------------------------------------------------------------------------------


@dataclass
class Env:
    sandbox: Sandbox
    registry: ChartRegistry
    node: RealNode
    dns: PodDns
    platform: Platform
    torch: Image
    torch_ref: str
    exports: Path
    times: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    node_mod.preflight()
    times: dict[str, float] = {}
    render: RenderOutput = render_stack("local", tmp_path_factory.mktemp("node-render") / "out", extra=node_stack())
    sandbox = Sandbox(
        tmp_path_factory.mktemp("node-sandbox"),
        kueue_settings=kueue_settings(render),
        controller_users=controller_users(render),
    )
    if os.environ.get("E2E_NO_BUILD") != "1":
        Builder(sandbox.versions).build(node=True)
    runtime = next(o for o in render.of_kind("ClusterTrainingRuntime") if o["metadata"]["name"] == RUNTIME)
    mirrored = _trainer_container(runtime)["image"]
    start = time.monotonic()
    torch = stand_in_image(TORCH)  # built before the session by python -m tests.e2e.run (it needs the network)
    times["torch stand-in image read"] = round(time.monotonic() - start, 1)
    with sandbox:
        cert = sandbox.ca.issue("registry", "e2e-registry", hosts=("127.0.0.1",))
        with ChartRegistry([], cert=cert.cert, key=cert.key) as registry:
            torch_ref = publish(registry, TORCH.upstream, torch)
            assert torch_ref == mirrored, (torch_ref, mirrored)
            pause_ref = publish(registry, node_mod.PAUSE_IMAGE, pause_image(Builder(sandbox.versions).binary("pause")))
            workdir = tmp_path_factory.mktemp("node-real")
            node = RealNode(
                sandbox,
                workdir,
                registry_hosts={node_mod.MIRROR.split("/")[0]: f"https://{registry.host}"},
                registry_ca=sandbox.ca.cert_path,
                sandbox_image=pause_ref,
                name=NODE,
                cluster_dns="10.250.1.1",
            )
            dns = PodDns(sandbox.client, node.cluster_dns or "")
            start = time.monotonic()
            node.start()
            try:
                dns.start()
                node.advertise(GPU, NODE_GPUS)
                times["node start, DNS, GPUs advertised"] = round(time.monotonic() - start, 1)
                exports = workdir.parent / f"{workdir.name}-exports"
                for claim in render.of_kind("PersistentVolumeClaim"):
                    prepare_export(exports / claim["metadata"]["namespace"] / claim["metadata"]["name"])
                start = time.monotonic()
                applied = apply_render(sandbox, render.directory, volume_root=exports)
                platform = Platform(applied, list(applied.objects))
                for team in platform.render_teams():
                    wait_admission_enforced(sandbox.client, team.namespace)
                times["render applied"] = round(time.monotonic() - start, 1)
                yield Env(sandbox, registry, node, dns, platform, torch, torch_ref, exports, times)
            finally:
                dns.stop()
                node.stop()
                print(f"\n[node training] measured: {times}", flush=True)


def _trainer_container(runtime: Obj) -> Obj:
    job = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    return next(c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node")


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


def test_team_member_trains_with_the_sdk_on_the_real_node(env: Env) -> None:
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    admin = env.sandbox.client
    team: Team = env.platform.render_teams()[0]
    ns = team.namespace
    labels = admin.get("v1", "Namespace", ns)["metadata"]["labels"]
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted", labels

    sdk = TrainerClient(
        backend_config=KubernetesBackendConfig(
            namespace=ns, config_file=str(env.sandbox.user_kubeconfig(team.user, team.groups))
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
    env.times["TrainJob created → finished"] = round(time.monotonic() - start, 1)
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
    real = admin.get("v1", "Node", env.node.name)
    assert all(real["metadata"]["labels"].get(k) == v for k, v in flavor["spec"]["nodeLabels"].items())

    # both pods ran on the real node, from the mirror's image, as uid 1000, and exited 0
    assert len(pods) == NUM_NODES, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        assert pod["spec"]["nodeName"] == env.node.name
        status = pod["status"]["containerStatuses"][0]
        assert status["state"]["terminated"]["exitCode"] == 0, status
        assert status["image"] == env.torch_ref
        assert status["imageID"] == f"{env.torch_ref.rsplit(':', 1)[0]}@{env.torch.digest}", status
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
