"""`fleet`: one platform over several clusters with Kueue's MultiKueue. The stack's own `kubernetes`,
`components`, teams, runtimes, queues and storage describe the manager and everything the clusters share;
each worker adds only what is its own: how to reach it, and its node pools."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, StringConstraints

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel, KubeMinor, Quantity
from trainer_infra.nodepools.registry import NodePoolConfig

DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
Duration = Annotated[str, StringConstraints(pattern=DURATION)]
ApiServer = Annotated[str, StringConstraints(pattern=r"^https://[^\s/]+(/[^\s]*)?$")]


class WorkerConfig(StrictModel):
    """One worker cluster: MultiKueue dispatches jobs to it; it runs them on its own node pools."""

    name: DnsLabel = Field(description="Cluster name: the MultiKueueCluster and the Pulumi resource prefix.")
    kubeconfig: SecretStr | None = Field(
        default=None,
        description="kubeconfig with which `pulumi up` reaches the worker; set it with "
        "`pulumi config set --secret --path 'trainer-platform:fleet.workers[N].kubeconfig'`. Never plain text.",
    )
    context: str | None = Field(default=None, description="kubeconfig context to use.")
    version: KubeMinor | None = Field(default=None, description="Kubernetes minor version (default: the manager's).")
    api_server: ApiServer = Field(
        description="The worker's API server URL as the manager's Kueue pod reaches it (written into the "
        "kubeconfig Secret MultiKueue uses).",
    )
    token_generation: int = Field(
        default=1,
        ge=1,
        description="Bump to rotate the manager's credentials for this worker: a new ServiceAccount token "
        "Secret is created, the manager's kubeconfig Secret is updated in place, the old token is deleted.",
    )
    node_pools: list[NodePoolConfig] = Field(default_factory=list, description="The worker's node pools.")
    draining: bool = Field(
        default=False,
        description="Take the worker out of service: its ClusterQueues admit nothing new (`stopPolicy: Hold`), "
        "jobs already running there finish and keep reporting to the manager, the manager stops counting its "
        "quota; what the stack manages there is retained in the cluster, not protected, so that leaving "
        "deletes only the manager's identity there. A worker can leave `fleet.workers` only after a "
        "`pulumi up` with `draining: true`.",
    )


class MultiKueueSettings(StrictModel):
    """Kueue Configuration `multiKueue` on the manager (durations as Go durations, e.g. 30s, 15m)."""

    gc_interval: Duration = Field(default="1m", description="How often orphaned remote objects are collected.")
    origin: DnsLabel = Field(default="multikueue", description="Label value marking objects this manager created.")
    worker_lost_timeout: Duration = Field(
        default="15m",
        description="How long a workload stays admitted on a worker the manager lost contact with before the "
        "manager evicts it (not dispatched again by Kueue 0.19.2: `trainer-infra fleet redispatch`, docs/fleet.md).",
    )


class ManagerQuota(StrictModel):
    """The manager's ClusterQueue quota: each team's quota on every worker pool, one flavor per worker and
    pool (so the manager's total is the sum over the workers, and a job must fit one worker), optionally
    capped per resource (`nvidia.com/gpu`, `cpu`, `memory`)."""

    mode: Literal["sum"] = Field(default="sum", description="How worker quotas combine (sum).")
    cap: dict[str, Quantity] = Field(
        default_factory=dict,
        description="Upper bound per resource name on each team's share of one worker pool on the manager.",
    )


class FleetConfig(StrictModel):
    """A MultiKueue fleet: this stack's cluster is the manager; jobs run on the workers."""

    manager_name: DnsLabel = Field(default="manager", description="Name of the manager cluster.")
    workers: list[WorkerConfig] = Field(min_length=1, max_length=20, description="Worker clusters, preferred first.")
    multi_kueue: MultiKueueSettings = Field(default_factory=MultiKueueSettings)
    manager_quota: ManagerQuota = Field(default_factory=ManagerQuota)
    manager_trainer_controller: bool = Field(
        default=True,
        description="Run the Trainer controller on the manager. Trainer < 2.3.0 ignores TrainJob "
        "spec.managedBy and would run every job on the manager too: set false there (CRDs only, "
        "webhooks fail open; the worker's Trainer validates and runs the job).",
    )
