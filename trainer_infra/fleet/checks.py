"""Fleet checks on the config alone, before any cluster's config is derived. Each returns issues with the
path the user edits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from packaging.version import Version
from pydantic import SecretStr

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.fleet.config import FleetConfig
from trainer_infra.teams.model import TeamConfig

SET_SECRET = "pulumi config set --secret --path 'trainer-platform:fleet.workers[{i}].kubeconfig' < worker.kubeconfig"
MANAGED_BY_TRAINER = Version("2.3.0")  # kubeflow/trainer#3681 (fixes #3632): the controller honours managedBy


def check_workers(
    fleet: FleetConfig, manager_kubeconfig: SecretStr | None, is_secret: Callable[[SecretStr], bool]
) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    seen = {fleet.manager_name: "fleet.managerName"}
    for i, w in enumerate(fleet.workers):
        path = f"fleet.workers[{i}]"
        if w.kubeconfig is None:
            issues.append(
                ConfigIssue(f"{path}.kubeconfig", "a worker needs a kubeconfig", None, SET_SECRET.format(i=i))
            )
        elif not is_secret(w.kubeconfig):
            issues.append(
                ConfigIssue(
                    f"{path}.kubeconfig",
                    "a worker kubeconfig must be a Pulumi secret, never plain text in the stack file",
                    "plain text",
                    SET_SECRET.format(i=i),
                )
            )
        if w.name == fleet.manager_name:
            issues.append(
                ConfigIssue(
                    f"{path}.name",
                    "the manager is listed as its own worker",
                    w.name,
                    "list only worker clusters under fleet.workers; the stack's own cluster is the manager",
                )
            )
        elif w.name in seen:
            issues.append(
                ConfigIssue(
                    f"{path}.name", f"duplicate cluster name (also {seen[w.name]})", w.name, "name each cluster once"
                )
            )
        else:
            seen[w.name] = f"{path}.name"
        same_secret = (
            w.kubeconfig is not None
            and manager_kubeconfig is not None
            and is_secret(w.kubeconfig)
            and w.kubeconfig.get_secret_value() == manager_kubeconfig.get_secret_value()
            and _readable(w.kubeconfig)
        )
        if same_secret:
            issues.append(
                ConfigIssue(
                    f"{path}.kubeconfig",
                    "this worker's kubeconfig is the manager's (kubernetes.kubeconfig): the manager would be "
                    "its own worker",
                    None,
                    "give each worker the kubeconfig of its own cluster",
                )
            )
    return issues


def _readable(value: SecretStr) -> bool:
    """Offline renders see only a placeholder for secrets; two placeholders prove nothing."""
    return value.get_secret_value() not in ("", "<secret>")


def check_manager_pools(node_pools: Sequence[Any]) -> list[ConfigIssue]:
    if not node_pools:
        return []
    return [
        ConfigIssue(
            "nodePools",
            "a fleet's manager runs no training jobs: node pools belong to workers",
            f"{len(node_pools)} pool(s)",
            "move them to fleet.workers[N].nodePools",
        )
    ]


MAX_FLAVORS = 64  # Kueue's limit of flavors per ClusterQueue resource group


def check_manager_flavors(fleet: FleetConfig) -> list[ConfigIssue]:
    """The manager's team queues get one flavor per worker pool, in one resource group."""
    count = sum(len(w.node_pools) for w in fleet.workers)
    if count <= MAX_FLAVORS:
        return []
    return [
        ConfigIssue(
            "fleet.workers",
            f"the manager's ClusterQueues would need one flavor per worker pool; Kueue allows {MAX_FLAVORS}",
            f"{count} worker pools",
            "use fewer pools per worker, or split the workers over several fleets",
        )
    ]


def check_served(fleet: FleetConfig, teams: Sequence[TeamConfig]) -> list[ConfigIssue]:
    """A team queue on the manager whose quota names a pool no worker has would admit nothing anywhere."""
    pools = {p.name for w in fleet.workers for p in w.node_pools}
    issues = []
    for i, team in enumerate(teams):
        for pool in team.quota:
            if pool not in pools:
                issues.append(
                    ConfigIssue(
                        f"teams[{i}].quota.{pool}",
                        "no worker has this pool, so no worker can serve this team's queue",
                        pool,
                        f"worker pools: {', '.join(sorted(pools)) or '(none)'}; add the pool to a worker or "
                        "drop the quota",
                    )
                )
    return issues


def check_manager_trainer(fleet: FleetConfig, trainer_version: str, path: str) -> list[ConfigIssue]:
    if not fleet.manager_trainer_controller or Version(trainer_version) >= MANAGED_BY_TRAINER:
        return []
    return [
        ConfigIssue(
            path,
            f"Trainer {trainer_version}'s controller ignores TrainJob spec.managedBy (kubeflow/trainer#3632, fixed "
            "in 2.3.0): on the manager it would run every job a second time",
            trainer_version,
            "set fleet.managerTrainerController: false (CRDs only on the manager), or use Trainer >= 2.3.0 there",
        )
    ]


def check_multikueue_settings(fleet: FleetConfig, kueue_installed: bool) -> list[ConfigIssue]:
    """`fleet.multiKueue` reaches Kueue's Configuration through its chart: with a Kueue this stack does not
    install, refused rather than silently ignored."""
    if kueue_installed or "multi_kueue" not in fleet.model_fields_set:
        return []
    hint = (
        "set gcInterval, origin and workerLostTimeout in the `multiKueue` block of your Kueue's Configuration and "
        "remove fleet.multiKueue (or set components.kueue.install: true)"
    )
    return [ConfigIssue("fleet.multiKueue", "Kueue's settings, and this stack does not install Kueue", None, hint)]
