"""Cross-field checks of `teams[]`: unique names and namespaces, no team inside a platform namespace."""

from __future__ import annotations

from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigIssue

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
    return issues
