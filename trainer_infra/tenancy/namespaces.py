"""Team namespaces: the unit of isolation (RBAC, quota, Pod Security) and of data (the team claim)."""

from __future__ import annotations

from trainer_infra.config.stack import StackConfig
from trainer_infra.manifests import meta
from trainer_infra.plan.model import ManagedObject
from trainer_infra.teams import TeamConfig
from trainer_infra.tenancy.protection import TEAM_LABEL, decommission_annotations, team_data_protected

PSA = "pod-security.kubernetes.io"


def namespace_labels(cfg: StackConfig, team: TeamConfig) -> dict[str, str]:
    """`trainer-platform.io/team` (select team namespaces, e.g. in Kueue's managedJobsNamespaceSelector) and
    Pod Security admission. Enforcement is pinned to the cluster's minor version so a Kubernetes upgrade
    never tightens it silently; audit records what `restricted` would reject, for a later tightening."""
    return {
        TEAM_LABEL: team.name,
        f"{PSA}/enforce": team.pod_security,
        f"{PSA}/enforce-version": f"v{cfg.kubernetes.version}",
        f"{PSA}/warn": team.pod_security,
        f"{PSA}/warn-version": f"v{cfg.kubernetes.version}",
        f"{PSA}/audit": "restricted",
    }


def team_namespace(cfg: StackConfig, team: TeamConfig) -> ManagedObject:
    manifest = meta.namespace(team.resolved_namespace, labels=namespace_labels(cfg, team))
    if team.decommission:
        manifest["metadata"]["annotations"] = decommission_annotations(team)
    keep = team_data_protected(cfg, team)
    return ManagedObject(manifest, protect=keep, retain_on_delete=keep)
