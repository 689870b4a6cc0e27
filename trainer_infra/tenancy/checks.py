"""Cross-field checks of `teams[]`: unique names and namespaces, no team inside a platform namespace."""

from __future__ import annotations

from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigIssue
from trainer_infra.teams import TeamConfig

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def tenancy_issues(cfg: StackConfig) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    reserved = {ns: f"the {c} controller's namespace" for c, ns in cfg.components.resolved_namespaces().items()}
    reserved |= {ns: "a Kubernetes system namespace" for ns in SYSTEM_NAMESPACES}
    if cfg.storage is not None and cfg.storage.nfs is not None and cfg.storage.nfs.in_cluster_server.enabled:
        reserved[cfg.storage.nfs.in_cluster_server.namespace] = "the in-cluster NFS server's namespace"
    names: dict[str, int] = {}
    namespaces: dict[str, int] = {}
    for i, team in enumerate(cfg.teams):
        if team.name in names:
            issues.append(ConfigIssue(f"teams[{i}].name", f"duplicate of teams[{names[team.name]}].name", team.name))
        names.setdefault(team.name, i)
        ns = team.resolved_namespace
        path = f"teams[{i}].namespace" if team.namespace else f"teams[{i}].name"
        if ns in namespaces:
            issues.append(
                ConfigIssue(
                    path,
                    f"namespace {ns} is already teams[{namespaces[ns]}]'s",
                    ns,
                    "every team needs its own namespace",
                )
            )
        elif ns in reserved:
            issues.append(ConfigIssue(path, f"namespace {ns} is {reserved[ns]}", ns, "set teams[].namespace"))
        namespaces.setdefault(ns, i)
        issues += _quota_needs_defaults(i, team)
    return issues


def _quota_needs_defaults(i: int, team: TeamConfig) -> list[ConfigIssue]:
    """A ResourceQuota on requests.X makes the API server refuse every pod without an X request, and
    Kueue has already admitted the job by then: it sits admitted with no pods (found in the e2e sandbox
    with an SDK job that set no memory). A LimitRange default request closes the gap."""
    if team.resource_quota is None:
        return []
    defaults = team.limit_range.default_request if team.limit_range else {}
    missing = []
    for key in sorted(team.resource_quota.hard):
        resource = key.removeprefix("requests.")  # a bare `cpu` quota means requests.cpu too
        if resource in ("cpu", "memory") and resource not in defaults:
            missing.append(resource)
    if not missing:
        return []
    return [
        ConfigIssue(
            f"teams[{i}].resourceQuota.hard",
            f"a quota on {', '.join(missing)} refuses every pod that does not request it",
            None,
            "add teams[].limitRange.defaultRequest for " + " and ".join(missing),
        )
    ]
