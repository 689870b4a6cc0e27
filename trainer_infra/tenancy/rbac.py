"""RBAC for team members: everything the `kubeflow` SDK (TrainerClient) and kubectl users need inside
their own namespace, read-only access to ClusterTrainingRuntimes, and read access to the Trainer's
public ConfigMap (the SDK reads it in the Trainer namespace, kubeflow/sdk#529). Nothing cluster-wide
writes: the only ClusterRoleBindings grant get/list/watch.

Writes are only what the SDK does (the unit tests' SDK recorder records every public TrainerClient call): create and
delete TrainJobs. No update/patch: a member who may patch `spec.suspend` starts pods Kueue did not admit.
With the team file service on (`storage.files`), members may `get` its Service's proxy, by that one name: the API
server authorizes a proxied GET or HEAD as `get` and a write as `create`/`update`/`patch`/`delete`
(k8s.io/apiserver requestinfo.go), so they read their team's claim through it and write nothing.
Reads include the team's own ClusterQueue (quota and usage) and Kueue's visibility API for the namespace's
LocalQueues (a job's position in the queue).

The rules live in shared ClusterRoles; each team binds them with RoleBindings in its own namespace,
so a member of team A has no rights in team B's namespace.
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import jobset, kubernetes, kueue, trainer
from trainer_infra.manifests import meta
from trainer_infra.storage import files
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL
from trainer_infra.tenancy.notebook import NOTEBOOK

READ = ["get", "list", "watch"]
MEMBER_ROLE = "trainer-platform-team-member"
RUNTIME_EDITOR_ROLE = "trainer-platform-runtime-editor"
RUNTIME_READER_ROLE = "trainer-platform-runtime-reader"
SDK_PUBLIC_ROLE = "trainer-platform-sdk-public"
PUBLIC_CONFIGMAP = "kubeflow-trainer-public"
QUEUE_READER_ROLE = "trainer-platform-queue-reader"


def _rule(group: str, resources: list[str], verbs: list[str], names: list[str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _cluster_role(name: str, rules: list[dict[str, Any]], team: str | None = None) -> ManagedObject:
    labels = {TEAM_LABEL: team} if team else None
    return ManagedObject(
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": "ClusterRole",
            "metadata": meta.metadata(name, None, labels),
            "rules": rules,
        }
    )


def shared_roles(trainer_namespace: str, file_service: bool = False) -> list[ManagedObject]:
    """The roles every team binds (created once, whatever the number of teams)."""
    member = [
        _rule(trainer.GROUP, ["trainjobs"], [*READ, "create", "delete"]),
        _rule(trainer.GROUP, ["trainjobs/status", "trainingruntimes"], READ),
        _rule("", ["pods", "pods/log", "events", "persistentvolumeclaims"], READ),
        _rule(kubernetes.EVENTS_GROUP, ["events"], READ),
        _rule(jobset.GROUP, ["jobsets"], READ),
        _rule(kueue.GROUP, ["workloads", "localqueues"], READ),
        _rule(kueue.VISIBILITY_GROUP, ["localqueues/pendingworkloads"], ["get", "list"]),
    ]
    if file_service:
        # the proxy's resource name is the path segment as written (`<service>[:<port>]`): the bare name only
        member.append(_rule("", ["services/proxy"], ["get"], [files.NAME]))
    editor = [_rule(trainer.GROUP, ["trainingruntimes"], ["create", "update", "patch", "delete"])]
    reader = [_rule(trainer.GROUP, ["clustertrainingruntimes"], READ)]
    public = {
        "apiVersion": kubernetes.RBAC_API,
        "kind": "Role",
        "metadata": meta.metadata(SDK_PUBLIC_ROLE, trainer_namespace),
        "rules": [_rule("", ["configmaps"], ["get"], [PUBLIC_CONFIGMAP])],
    }
    return [
        _cluster_role(MEMBER_ROLE, member),
        _cluster_role(RUNTIME_EDITOR_ROLE, editor),
        _cluster_role(RUNTIME_READER_ROLE, reader),
        ManagedObject(public),
    ]


def subjects(team: TeamConfig) -> list[dict[str, str]]:
    m = team.members
    out = [{"kind": "User", "apiGroup": kubernetes.RBAC_GROUP, "name": u} for u in sorted(set(m.users))]
    out += [{"kind": "Group", "apiGroup": kubernetes.RBAC_GROUP, "name": g} for g in sorted(set(m.groups))]
    for ref in sorted(set(m.service_accounts)):
        ns, _, name = ref.rpartition("/")
        out.append({"kind": "ServiceAccount", "name": name, "namespace": ns or team.resolved_namespace})
    if team.notebook is not None:  # the notebook's SDK acts for the members: their rights, no more
        notebook = {"kind": "ServiceAccount", "name": NOTEBOOK, "namespace": team.resolved_namespace}
        out += [notebook] if notebook not in out else []
    return out


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, role: str, team: TeamConfig) -> ManagedObject:
    return ManagedObject(
        {
            "apiVersion": kubernetes.RBAC_API,
            "kind": kind,
            "metadata": meta.metadata(name, namespace, {TEAM_LABEL: team.name}),
            "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": role_kind, "name": role},
            "subjects": subjects(team),
        }
    )


def team_bindings(team: TeamConfig, trainer_namespace: str, cluster_queue: str | None) -> list[ManagedObject]:
    """A team without members gets no bindings (its namespace still works for service accounts you bind).
    `cluster_queue`: the team's ClusterQueue, readable by its members only (a role naming just that one)."""
    if not subjects(team):
        return []
    ns = team.resolved_namespace
    out = []
    if cluster_queue is not None:
        role = f"{QUEUE_READER_ROLE}-{team.name}"
        out.append(_cluster_role(role, [_rule(kueue.GROUP, ["clusterqueues"], READ, [cluster_queue])], team.name))
        out.append(_binding("ClusterRoleBinding", role, None, "ClusterRole", role, team))
    out += [
        _binding("RoleBinding", MEMBER_ROLE, ns, "ClusterRole", MEMBER_ROLE, team),
        _binding(
            "ClusterRoleBinding", f"{RUNTIME_READER_ROLE}-{team.name}", None, "ClusterRole", RUNTIME_READER_ROLE, team
        ),
        _binding("RoleBinding", f"{SDK_PUBLIC_ROLE}-{team.name}", trainer_namespace, "Role", SDK_PUBLIC_ROLE, team),
    ]
    if team.members.manage_runtimes:
        out.append(_binding("RoleBinding", RUNTIME_EDITOR_ROLE, ns, "ClusterRole", RUNTIME_EDITOR_ROLE, team))
    return out
