"""What a stack offers migrated jobs, read from the stack's rendered objects (plain dicts): the runtimes it
serves, its team namespaces with their LocalQueues, claims and Pod Security level, and its
WorkloadPriorityClasses. Reading the render keeps the migration in step with what `pulumi up` creates."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trainer_infra.core.objects import Plan
from trainer_infra.core.upstream.kubernetes import POD_SECURITY_PREFIX as PSA
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.manifests.meta import TEAM_LABEL
from trainer_infra.stack.validate import Validated


@dataclass(frozen=True)
class Team:
    name: str
    namespace: str
    queues: tuple[str, ...]
    claims: tuple[str, ...]
    pod_security: str  # the namespace's enforced Pod Security level
    pod_security_version: str  # e.g. v1.34
    service_accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Target:
    stack: str
    trainer_version: str
    runtimes: dict[str, dict[str, Any]]  # ClusterTrainingRuntime name → manifest
    team_runtimes: dict[tuple[str, str], dict[str, Any]]  # (namespace, name) → TrainingRuntime
    teams: dict[str, Team]  # namespace → team
    priority_classes: tuple[str, ...]
    namespace_map: dict[str, str] = field(default_factory=dict)  # v1 namespace → team namespace

    @classmethod
    def from_manifests(cls, stack: str, trainer_version: str, objects: Iterable[dict[str, Any]]) -> Target:
        objs = list(objects)

        def of(kind: str) -> list[dict[str, Any]]:
            return [o for o in objs if o.get("kind") == kind]

        def ns(o: dict[str, Any]) -> str:
            return str((o.get("metadata") or {}).get("namespace", ""))

        def name(o: dict[str, Any]) -> str:
            return str((o.get("metadata") or {}).get("name", ""))

        teams: dict[str, Team] = {}
        for n in of("Namespace"):
            labels = (n.get("metadata") or {}).get("labels") or {}
            if TEAM_LABEL not in labels:
                continue
            namespace = name(n)
            teams[namespace] = Team(
                name=str(labels[TEAM_LABEL]),
                namespace=namespace,
                queues=tuple(sorted(name(q) for q in of("LocalQueue") if ns(q) == namespace)),
                claims=tuple(sorted(name(c) for c in of("PersistentVolumeClaim") if ns(c) == namespace)),
                pod_security=str(labels.get(f"{PSA}/enforce", "privileged")),
                pod_security_version=str(labels.get(f"{PSA}/enforce-version", "latest")),
                # The data cache's initializer account may create LWSs and delete ServiceAccounts: the
                # platform's, never a migrated job's.
                service_accounts=tuple(
                    sorted(name(s) for s in of("ServiceAccount") if ns(s) == namespace and name(s) != CACHE_INITIALIZER)
                ),
            )
        return cls(
            stack=stack,
            trainer_version=trainer_version,
            runtimes={name(r): r for r in of("ClusterTrainingRuntime")},
            team_runtimes={(ns(r), name(r)): r for r in of("TrainingRuntime")},
            teams=teams,
            priority_classes=tuple(sorted(name(p) for p in of("WorkloadPriorityClass"))),
        )

    def runtime(self, namespace: str, name: str) -> tuple[str, dict[str, Any]] | None:
        """(kind, manifest) of the runtime a TrainJob in `namespace` gets for `name`: the team's
        TrainingRuntime shadows the ClusterTrainingRuntime of the same name (as the SDK resolves it)."""
        if (namespace, name) in self.team_runtimes:
            return "TrainingRuntime", self.team_runtimes[(namespace, name)]
        if name in self.runtimes:
            return "ClusterTrainingRuntime", self.runtimes[name]
        return None

    def runtime_names(self, namespace: str) -> list[str]:
        return sorted({*self.runtimes, *(n for (ns, n) in self.team_runtimes if ns == namespace)})


def stack_target(stack: str, validated: Validated, plan: Plan) -> Target:
    """The target for a validated stack: its plan's objects and the Trainer version it installs."""
    return Target.from_manifests(
        stack, validated.releases.by_name["trainer"].app_version, [o.manifest for o in plan.objects]
    )
