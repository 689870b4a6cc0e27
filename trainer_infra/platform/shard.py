"""A team shard's resources (stack/shards.py): the shard's objects on one Kubernetes provider, parented to the
stack itself. `pulumi state move` parents what it moves to the destination's stack, so the objects a migration
moves out of the platform stack's component keep their URNs here (no alias, no replace)."""

from __future__ import annotations

import pulumi

from trainer_infra.core.objects import Plan
from trainer_infra.platform.component import cluster_provider, object_resource, register_namespaces, register_objects

#: The provider's name in every stack: a moved object's provider is copied under the same name.
PROVIDER = "k8s"


def deploy_team_shard(plan: Plan) -> dict[str, pulumi.Resource]:
    """Registers the shard's objects (no charts or gates: the platform stack ran first) and returns them by key."""
    child = pulumi.ResourceOptions(provider=cluster_provider(PROVIDER, plan.cluster))
    created: dict[str, pulumi.Resource] = {}
    namespaces = register_namespaces(plan.objects, created, lambda obj: object_resource(obj, child, []))
    register_objects(
        plan.objects,
        namespaces,
        created,
        lambda obj: [created[key] for key in obj.after],
        lambda obj, deps: object_resource(obj, child, deps),
    )
    return created
