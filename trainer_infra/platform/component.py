"""`TrainingPlatform`: the one top-level component; turns a Plan into Pulumi resources with the right
ordering (charts → readiness gates → custom resources) and data protection."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainer_infra.core.objects import ClusterAccess, ManagedObject, Plan, WorkerKubeconfig
from trainer_infra.platform.cloud import register_cloud_resources
from trainer_infra.platform.gate import ReadinessGateResource
from trainer_infra.platform.helm import chart, with_objects
from trainer_infra.platform.objects import KubernetesObject

#: The component's type: part of the URN of every object of a single stack (stack/shards.py moves them by it).
TYPE = "trainer-platform:index:TrainingPlatform"


class TrainingPlatform(pulumi.ComponentResource):
    versions: pulumi.Output[Any]
    namespaces: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        plan: Plan,
        opts: pulumi.ResourceOptions | None = None,
        prefix: str = "",
        resolved: Mapping[WorkerKubeconfig, pulumi.Output[str]] | None = None,
    ):
        """`prefix` keeps resource names unique when several clusters share one program (a fleet);
        `resolved` gives the values of the plan's `WorkerKubeconfig` placeholders."""
        super().__init__(TYPE, name, None, opts)
        self._prefix = prefix
        self._resolved = resolved or {}
        self.created: dict[str, pulumi.Resource] = {}
        cluster = plan.cluster
        kubeconfig = pulumi.Output.secret(str(cluster.kubeconfig)) if cluster.kubeconfig else None
        self.provider = cluster_provider(f"{prefix}k8s", cluster, pulumi.ResourceOptions(parent=self))
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)

        # the cloud SDKs' node groups, each through its cluster's own provider (platform/cloud.py)
        self.created.update(register_cloud_resources(plan.resources, prefix, self))

        namespaces = register_namespaces(plan.objects, self.created, lambda obj: self._object(obj, child, []))

        # Releases and gates by name, so `after` can name either.
        ready: dict[str, pulumi.Resource] = {}
        by_group: dict[str, pulumi.Resource] = {}  # API group → the gate of the controller serving it
        # Gates of APIs the platform does not install (the Prometheus Operator's, a component with `install: false`):
        # checked up front, and a chart installed `after` such a component waits for its gate.
        for gate in (g for g in plan.gates if not g.release):
            ready[gate.name] = ReadinessGateResource(
                replace(gate, name=prefix + gate.name), kubeconfig, cluster.context, pulumi.ResourceOptions(parent=self)
            )
            by_group.update({group: ready[gate.name] for group in gate.api_groups})
        for release in plan.releases:
            after = [namespaces[release.namespace]] if release.namespace in namespaces else []
            after += [ready[name] for name in release.after]
            helm = chart(
                replace(release, name=prefix + release.name),
                plan.protect_crds,
                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=after)),
                leaving=plan.leaving,
            )
            ready[release.name] = helm
            # the gate (so every object served by this controller) also goes before the chart's objects on delete
            objects = with_objects(helm)
            for gate in (g for g in plan.gates if g.release == release.name):
                ready[gate.name] = ReadinessGateResource(
                    replace(gate, name=prefix + gate.name),
                    kubeconfig,
                    cluster.context,
                    pulumi.ResourceOptions(parent=self, depends_on=objects),
                )
                by_group.update({group: ready[gate.name] for group in gate.api_groups})

        def waits(obj: ManagedObject) -> list[pulumi.Resource]:
            deps = [ready.get(name) or self.created[name] for name in obj.after]
            return [*deps, by_group[obj.api_group]] if obj.api_group in by_group else deps

        register_objects(
            plan.objects, namespaces, self.created, waits, lambda obj, deps: self._object(obj, child, deps)
        )

        self.versions = pulumi.Output.from_input(plan.outputs["versions"])
        self.namespaces = pulumi.Output.from_input(plan.outputs["namespaces"])
        self.register_outputs({"versions": self.versions, "namespaces": self.namespaces})

    def _object(
        self, obj: ManagedObject, base: pulumi.ResourceOptions, deps: list[pulumi.Resource]
    ) -> KubernetesObject:
        return object_resource(obj, base, deps, self._prefix, self._resolved)


def object_resource(
    obj: ManagedObject,
    base: pulumi.ResourceOptions,
    deps: list[pulumi.Resource],
    prefix: str = "",
    resolved: Mapping[WorkerKubeconfig, pulumi.Output[str]] | None = None,
) -> KubernetesObject:
    """One object with the options that keep its data safe, named by its key (unique in a stack)."""
    opts = pulumi.ResourceOptions.merge(
        base,
        pulumi.ResourceOptions(
            depends_on=deps,
            protect=obj.protect,
            retain_on_delete=obj.retain_on_delete,
            # None unless the plan asks for it: an explicit False overrides the provider, which replaces an object
            # keeping its name (nearly all of ours) delete-first; forced create-first, that fails "already exists"
            delete_before_replace=obj.delete_before_replace or None,
            replace_on_changes=list(obj.replace_on_changes) or None,
        ),
    )
    manifest = _resolve(obj.manifest, resolved) if resolved else obj.manifest
    return KubernetesObject(prefix + obj.key, manifest, opts, patch=obj.patch)


def cluster_provider(name: str, cluster: ClusterAccess, opts: pulumi.ResourceOptions | None = None) -> k8s.Provider:
    return k8s.Provider(
        name,
        kubeconfig=pulumi.Output.secret(str(cluster.kubeconfig)) if cluster.kubeconfig else None,
        context=cluster.context,
        # The stack is the truth for every field it sets: an admin's `kubectl edit` takes those fields over
        # (server-side apply field managers), and without force the repairing `up --refresh` would stop at a
        # field conflict instead of putting them back (docs/drift.md). Fields the stack does not set stay
        # with their managers (webhook caBundles, the controllers' certificates, status).
        enable_patch_force=True,
        # A Secret whose data changes is updated in place, as the API server allows, not deleted and recreated (the
        # provider's default, kept for backward compatibility): a fleet's kubeconfig Secret rotates with MultiKueue
        # reading it throughout (docs/fleet.md), a team's secret changes without a moment where it does not exist.
        enable_secret_mutable=True,
        opts=opts,
    )


def register_namespaces(
    objects: tuple[ManagedObject, ...],
    created: dict[str, pulumi.Resource],
    make: Callable[[ManagedObject], pulumi.Resource],
) -> dict[str, pulumi.Resource]:
    """The plan's namespaces, first: everything else may live in one."""
    namespaces: dict[str, pulumi.Resource] = {}
    for obj in (o for o in objects if o.manifest["kind"] == "Namespace"):
        namespaces[obj.manifest["metadata"]["name"]] = created[obj.key] = make(obj)
    return namespaces


def register_objects(
    objects: tuple[ManagedObject, ...],
    namespaces: Mapping[str, pulumi.Resource],
    created: dict[str, pulumi.Resource],
    waits: Callable[[ManagedObject], list[pulumi.Resource]],
    make: Callable[[ManagedObject, list[pulumi.Resource]], pulumi.Resource],
) -> None:
    """The other objects, each after what it waits for (`waits`) and its namespace."""
    for obj in _after_first([o for o in objects if o.manifest["kind"] != "Namespace"]):
        deps = waits(obj)
        ns = obj.manifest["metadata"].get("namespace")
        if ns in namespaces:
            deps.append(namespaces[ns])
        created[obj.key] = make(obj, deps)


def _after_first(objects: list[ManagedObject]) -> list[ManagedObject]:
    """Plan order, except that an object comes after the objects its `after` names."""
    keys = {o.key for o in objects}
    done: set[str] = set()
    out: list[ManagedObject] = []
    pending = list(objects)
    while pending:
        ready = [o for o in pending if all(a in done or a not in keys for a in o.after)]
        if not ready:
            raise ValueError(f"objects wait for each other: {sorted(o.key for o in pending)}")
        out += ready
        done |= {o.key for o in ready}
        pending = [o for o in pending if o.key not in done]
    return out


def _resolve(value: Any, resolved: Mapping[WorkerKubeconfig, pulumi.Output[str]]) -> Any:
    if isinstance(value, WorkerKubeconfig):
        return resolved[value]
    if isinstance(value, dict):
        return {k: _resolve(v, resolved) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, resolved) for v in value]
    return value
