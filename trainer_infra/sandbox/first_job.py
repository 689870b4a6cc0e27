"""``trainer-infra sandbox first-job [--member USER] [--sandbox FILE]``: a data scientist's first TrainJob on the
sandbox of ``make sandbox-up`` (docs/sandbox.md "Your first training job").

As a team member (the kubeconfig ``sandbox.json`` names for them), with the kubeflow SDK, from the host:
``train_linear_model`` on the catalog's ``torch-distributed`` runtime, 2 nodes, through the team's queue; prints
the TrainJob's status, both nodes' logs and where its checkpoint is on the host. Exit 0 when it completed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from trainer_infra.sandbox.platform_sandbox import SANDBOX_JSON, default_dir

NODES = 2
#: a rank's line per step (unanchored: two ranks share the container's stdout, so one line may end where the next
#: begins)
STEP = re.compile(r"rank (\d+) step (\d+) loss (\d+\.\d{6})")


def train_linear_model() -> None:
    """A data scientist's function, run by ``torchrun`` on every node (the SDK ships its source): a ``Linear(1, 1)``
    under DistributedDataParallel over gloo, 10 SGD steps; rank 0 saves the model under ``$CHECKPOINT_DIR``."""
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


def train(member: dict[str, Any]) -> tuple[str, str, list[str]]:
    """Submit the job as ``member``, wait for it; its name, its status and the log lines of each node."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    client = TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=member["namespace"], config_file=member["kubeconfig"])
    )
    name = client.train(
        runtime=client.get_runtime("torch-distributed"),
        trainer=CustomTrainer(
            func=train_linear_model,
            num_nodes=NODES,
            resources_per_node={"gpu": 1, "cpu": "500m", "memory": "2Gi"},
        ),
        options=[Labels(labels={"kueue.x-k8s.io/queue-name": member["queue"]})],
    )
    job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=900)
    logs = []
    for node in range(NODES):
        logs.append(f"--- node-{node}")
        logs += list(client.get_job_logs(name, step=f"node-{node}"))
    return name, job.status, logs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sandbox", type=Path, default=default_dir() / SANDBOX_JSON, help="default: %(default)s")
    parser.add_argument("--member", help="a user of sandbox.json's members (default: the first)")
    args = parser.parse_args(argv)
    if not args.sandbox.exists():
        print(f"no {args.sandbox}: run `make sandbox-up` first", file=sys.stderr)
        return 1
    doc = json.loads(args.sandbox.read_text())
    members = [m for m in doc["members"] if args.member in (None, m["user"])]
    if not members:
        print(f"no member {args.member!r} in {args.sandbox}: {[m['user'] for m in doc['members']]}", file=sys.stderr)
        return 1
    member = members[0]
    name, status, logs = train(member)
    print(f"TrainJob {name} in {member['namespace']} as {member['user']}: {status}")
    print("\n".join(logs))
    claim = next(c for c in doc["claims"] if c["namespace"] == member["namespace"])
    print(f"checkpoint: {claim['hostDirectory']}/jobs/{name}/checkpoints/model.pt")
    return 0 if status == "Complete" else 1


if __name__ == "__main__":
    sys.exit(main())
