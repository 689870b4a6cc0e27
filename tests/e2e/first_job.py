"""``python -m tests.e2e.first_job [--member USER] [--sandbox FILE]``: a data scientist's first TrainJob on the
sandbox of ``make sandbox-up`` (docs/sandbox.md "Your first training job").

As a team member (the kubeconfig ``sandbox.json`` names for them), with the kubeflow SDK, from the host:
``train_linear_model`` on the catalog's ``torch-distributed`` runtime, 2 nodes, through the team's queue; prints
the TrainJob's status, both nodes' logs and where its checkpoint is on the host. Exit 0 when it completed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tests.e2e.platform_sandbox import SANDBOX_JSON, default_dir
from tests.e2e.test_node_training import train_linear_model

NODES = 2


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
