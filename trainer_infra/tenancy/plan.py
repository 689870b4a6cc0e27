"""`teams[]` → namespaces, member RBAC, quotas, limit ranges, secrets, and what holds against a hostile
member: admission policies and NetworkPolicies (one PlanPart)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainer_infra.admission.model import AdmissionSettings
from trainer_infra.core.objects import ManagedObject, PlanPart
from trainer_infra.core.quota import add_shares
from trainer_infra.storage import files
from trainer_infra.teams.model import TeamConfig
from trainer_infra.tenancy.admission.policy import admission_objects, namespace_annotations
from trainer_infra.tenancy.ephemeral_storage import EphemeralStorageConfig
from trainer_infra.tenancy.limits import limit_objects
from trainer_infra.tenancy.namespaces import team_namespace
from trainer_infra.tenancy.network import NetworkSettings, network_policies
from trainer_infra.tenancy.notebook import notebook_objects, notebook_quota_share
from trainer_infra.tenancy.rbac import shared_roles, team_bindings
from trainer_infra.tenancy.secrets import secret_objects


def tenancy_plan(
    teams: Sequence[TeamConfig],
    trainer_namespace: str,
    kubernetes: str,
    allow_data_loss: bool,
    *,
    cluster_queues: Mapping[str, str],
    admission: AdmissionSettings,
    network: NetworkSettings | None,
    ephemeral_storage: EphemeralStorageConfig | None = None,
    file_service: bool = False,
    mirror: str | None = None,
    team_claim: tuple[str, str] | None = None,
) -> PlanPart:
    """`cluster_queues`: team name → its ClusterQueue; `network` None: no NetworkPolicies; `file_service`: members
    may read their team's file service (`storage/files.py`); `team_claim`: the team claim's name and mount path
    (None: no storage)."""
    if not teams:
        return PlanPart()
    objects: list[ManagedObject] = shared_roles(trainer_namespace, file_service)
    allowed = {t.namespace: namespace_annotations(t) for t in admission.teams}
    namespaces: list[str] = []
    for team in teams:
        namespace = team_namespace(team, kubernetes, allow_data_loss, allowed.get(team.resolved_namespace, {}))
        namespaces.append(namespace.key)
        objects.append(namespace)
        objects += team_bindings(team, trainer_namespace, cluster_queues.get(team.name))
        platform_pods = (
            files.quota_share() if file_service else {},
            notebook_quota_share(team.notebook) if team.notebook is not None else {},
        )
        objects += limit_objects(team, ephemeral_storage, add_shares(*platform_pods))
        objects += secret_objects(team)
        if network is not None:
            policies = network_policies(team.resolved_namespace, team.name, network, team.notebook is not None)
            objects += [ManagedObject(p) for p in policies]
        claim, mount_path = team_claim or (None, None)
        objects += [ManagedObject(o) for o in notebook_objects(team, mirror, claim, mount_path)]
    # the policies read the allow-lists from the namespaces: never applied before them (a first `up` that adds the
    # annotations would otherwise refuse the teams' jobs for a moment)
    objects += [ManagedObject(o, after=tuple(namespaces)) for o in admission_objects(admission)]
    return PlanPart(objects=tuple(objects))
