"""Cross-field checks of `teams[]`: unique names and namespaces, no team inside a platform namespace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainer_infra.core import kube
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.upstream import kubernetes
from trainer_infra.teams.model import TeamConfig
from trainer_infra.tenancy.config import NetworkPoliciesConfig
from trainer_infra.tenancy.secrets import HF_TOKEN_SECRET

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def check_teams(teams: Sequence[TeamConfig], platform: Mapping[str, str]) -> list[ConfigIssue]:
    """`platform`: namespaces the platform itself uses → whose they are (e.g. "the kueue controller's")."""
    issues: list[ConfigIssue] = []
    reserved = {**{ns: "a Kubernetes system namespace" for ns in SYSTEM_NAMESPACES}, **platform}
    names: dict[str, int] = {}
    namespaces: dict[str, int] = {}
    for i, team in enumerate(teams):
        if team.name in names:
            # One mistake, one error: the clashing namespace and queue follow from the name.
            issues.append(ConfigIssue(f"teams[{i}].name", f"duplicate of teams[{names[team.name]}].name", team.name))
            continue
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
        issues += _quota_needs_defaults(i, team) + _api_rules(i, team)
        issues += _privileged_needs_override(i, team)
        issues += _dangerous_members(i, team)
    return issues


#: Groups every (or every unauthenticated, every service account's, the admins') identity is in: binding the
#: member role to them makes the whole cluster (or the internet, or every workload) a team member.
DANGEROUS_GROUPS = {
    "system:authenticated": "every authenticated user and service account of the cluster",
    "system:unauthenticated": "anonymous requests",
    "system:serviceaccounts": "every service account of every namespace",
    "system:masters": "the cluster admins (they need no binding)",
    "system:nodes": "the kubelets",
}


def _dangerous_members(i: int, team: TeamConfig) -> list[ConfigIssue]:
    issues = []
    hint = "name the people's users or groups as your authenticator issues them; workloads via members.serviceAccounts"
    for j, group in enumerate(team.members.groups):
        if group in DANGEROUS_GROUPS:
            why = DANGEROUS_GROUPS[group]
            issues.append(ConfigIssue(f"teams[{i}].members.groups[{j}]", f"this group is {why}", group, hint))
        elif group.startswith("system:serviceaccounts:"):
            why = f"every service account of namespace {group.rsplit(':', 1)[-1]}"
            issues.append(ConfigIssue(f"teams[{i}].members.groups[{j}]", f"this group is {why}", group, hint))
        elif group.startswith("system:"):
            issues.append(ConfigIssue(f"teams[{i}].members.groups[{j}]", "a Kubernetes system group", group, hint))
    for j, user in enumerate(team.members.users):
        if user.startswith("system:"):
            issues.append(ConfigIssue(f"teams[{i}].members.users[{j}]", "a Kubernetes system identity", user, hint))
    return issues


def _has_members(team: TeamConfig) -> bool:
    m = team.members
    return bool(m.users or m.groups or m.service_accounts)


def _privileged_needs_override(i: int, team: TeamConfig) -> list[ConfigIssue]:
    """`privileged` lets a member's pod own the node (and every team's data on it)."""
    if team.pod_security != "privileged" or team.allow_privileged or not _has_members(team):
        return []
    return [
        ConfigIssue(
            f"teams[{i}].podSecurity",
            "privileged Pod Security lets any member run pods that own the node and read other teams' data",
            "privileged",
            "use baseline; or, for a team you trust with the cluster, also set teams[].allowPrivileged: true",
        )
    ]


def check_restricted(
    teams: Sequence[TeamConfig], served: Sequence[tuple[str | None, str, str | None]]
) -> list[ConfigIssue]:
    """`restricted` teams: every runtime served to them must pass Pod Security `restricted`, or every job on it
    is refused after Kueue admitted it. `served`: (team name, or None for a cluster runtime every team gets;
    runtime name; why `restricted` refuses its pods, or None)."""
    issues = []
    for i, team in enumerate(teams):
        if team.pod_security != "restricted":
            continue
        mine = [(name, why) for owner, name, why in served if owner in (None, team.name)]
        refused = dict(sorted((name, why) for name, why in mine if why is not None))
        if not refused:
            continue
        detail = "; ".join(f"{name}: {why}" for name, why in refused.items())
        compliant = sorted({name for name, why in mine if why is None})
        hint = (
            "use baseline, or serve this team only compliant runtimes (cluster runtimes reach every team: "
            f"runtimes.enabled: [{', '.join(compliant)}] leaves the others out)"
            if compliant
            else "use baseline: no runtime served to this team passes restricted (runtimes.securityContext.enabled "
            "makes the catalog runtimes pass)"
        )
        issues.append(
            ConfigIssue(
                f"teams[{i}].podSecurity",
                f"restricted refuses the pods of {len(refused)} runtime(s) served to this team: {detail}",
                "restricted",
                hint,
            )
        )
    return issues


def _api_rules(i: int, team: TeamConfig) -> list[ConfigIssue]:
    """What the API server refuses in a team's ResourceQuota and LimitRange, and the Secret name that
    belongs to `hfToken`."""
    issues = []
    if team.resource_quota is not None:
        for key, value in team.resource_quota.hard.items():
            if (problem := kube.quantity_problem(key, value)) is not None:
                issues.append(ConfigIssue(f"teams[{i}].resourceQuota.hard.{key}", problem, value))
    if team.limit_range is not None:
        lr = team.limit_range
        bounds = {"min": lr.min, "defaultRequest": lr.default_request, "default": lr.default, "max": lr.max}
        for where, problem in kube.limit_range_problems(bounds):
            kind, _, resource = where.partition(".")
            issues.append(ConfigIssue(f"teams[{i}].limitRange.{where}", problem, bounds[kind][resource]))
    if HF_TOKEN_SECRET in team.secrets.extra:
        issues.append(
            ConfigIssue(
                f"teams[{i}].secrets.extra.{HF_TOKEN_SECRET}",
                f"Secret {HF_TOKEN_SECRET} is the one teams[].secrets.hfToken makes (initializers read it)",
                None,
                "set the token as secrets.hfToken, and name other Secrets differently",
            )
        )
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


def check_notebooks(teams: Sequence[TeamConfig], network: NetworkPoliciesConfig) -> list[ConfigIssue]:
    """A notebook submits through the API server: with the teams' NetworkPolicies on, its allowance needs the API
    server's endpoints, which only the cluster knows."""
    if not network.enabled or network.api_server is not None:
        return []
    return [
        ConfigIssue(
            f"teams[{i}].notebook",
            "a notebook needs tenancy.networkPolicies.apiServer: the team's NetworkPolicies close every private "
            "address, the API server's too, and its SDK could not submit",
            None,
            "set tenancy.networkPolicies.apiServer.cidrs and .port to the endpoints of the `kubernetes` Service "
            f"(kubectl get endpointslices -n default -l {kubernetes.SERVICE_NAME_LABEL}=kubernetes)",
        )
        for i, team in enumerate(teams)
        if team.notebook is not None
    ]
