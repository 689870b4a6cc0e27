"""Team namespaces: the unit of isolation (RBAC, quota, Pod Security) and of data (the team claim)."""

from __future__ import annotations

from collections.abc import Mapping

from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream.kubernetes import POD_SECURITY_PREFIX as PSA
from trainer_infra.manifests import meta
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL, decommission_annotations, team_data_protected


def namespace_labels(team: TeamConfig, kubernetes: str) -> dict[str, str]:
    """`trainer-platform.io/team` (select team namespaces, e.g. in Kueue's managedJobsNamespaceSelector) and
    Pod Security admission. Enforcement is pinned to the cluster's minor version so a Kubernetes upgrade
    never tightens it silently; audit records what `restricted` would reject, for a later tightening."""
    return {
        TEAM_LABEL: team.name,
        f"{PSA}/enforce": team.pod_security,
        f"{PSA}/enforce-version": f"v{kubernetes}",
        f"{PSA}/warn": team.pod_security,
        f"{PSA}/warn-version": f"v{kubernetes}",
        f"{PSA}/audit": "restricted",
    }


def team_namespace(
    team: TeamConfig, kubernetes: str, allow_data_loss: bool, annotations: Mapping[str, str]
) -> ManagedObject:
    """`annotations`: what the admission policies read from the namespace (its allow-lists)."""
    manifest = meta.namespace(team.resolved_namespace, labels=namespace_labels(team, kubernetes))
    extra = decommission_annotations(team) or {}
    if annotations or extra:
        manifest["metadata"]["annotations"] = dict(sorted({**annotations, **extra}.items()))
    keep = team_data_protected(team, allow_data_loss)
    return ManagedObject(manifest, protect=keep, retain_on_delete=keep)
