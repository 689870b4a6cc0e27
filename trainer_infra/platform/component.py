"""`TrainingPlatform`: the one top-level component; turns a Plan into Pulumi resources with the right
ordering (charts → readiness gates → custom resources) and data protection."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from trainer_infra.core.objects import ManagedObject, Plan
from trainer_infra.platform.gate import ReadinessGateResource
from trainer_infra.platform.helm import chart
from trainer_infra.platform.objects import KubernetesObject


class TrainingPlatform(pulumi.ComponentResource):
    versions: pulumi.Output[Any]
    namespaces: pulumi.Output[Any]

    def __init__(self, name: str, plan: Plan, opts: pulumi.ResourceOptions | None = None):
        super().__init__("trainer-platform:index:TrainingPlatform", name, None, opts)
        cluster = plan.cluster
        kubeconfig = pulumi.Output.secret(str(cluster.kubeconfig)) if cluster.kubeconfig else None
        self.provider = k8s.Provider(
            "k8s",
            kubeconfig=kubeconfig,
            context=cluster.context,
            opts=pulumi.ResourceOptions(parent=self),
        )
        child = pulumi.ResourceOptions(parent=self, provider=self.provider)

        namespaces: dict[str, pulumi.Resource] = {}
        for obj in plan.objects:
            if obj.manifest["kind"] == "Namespace":
                namespaces[obj.manifest["metadata"]["name"]] = self._object(obj, child, [])

        # Releases and gates by name, so `after` can name either.
        ready: dict[str, pulumi.Resource] = {}
        by_group: dict[str, pulumi.Resource] = {}  # API group → the gate of the controller serving it
        for release in plan.releases:
            after = [namespaces[release.namespace]] if release.namespace in namespaces else []
            after += [ready[name] for name in release.after]
            helm = chart(
                release,
                plan.protect_crds,
                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=after)),
            )
            ready[release.name] = helm
            for gate in (g for g in plan.gates if g.release == release.name):
                ready[gate.name] = ReadinessGateResource(
                    gate, kubeconfig, cluster.context, pulumi.ResourceOptions(parent=self, depends_on=[helm])
                )
                by_group.update({group: ready[gate.name] for group in gate.api_groups})

        created: dict[str, pulumi.Resource] = {}
        for obj in plan.objects:
            if obj.manifest["kind"] == "Namespace":
                continue
            deps: list[pulumi.Resource] = [ready.get(name) or created[name] for name in obj.after]
            if obj.api_group in by_group:
                deps.append(by_group[obj.api_group])
            ns = obj.manifest["metadata"].get("namespace")
            if ns in namespaces:
                deps.append(namespaces[ns])
            created[obj.key] = self._object(obj, child, deps)

        self.versions = pulumi.Output.from_input(plan.outputs["versions"])
        self.namespaces = pulumi.Output.from_input(plan.outputs["namespaces"])
        self.register_outputs({"versions": self.versions, "namespaces": self.namespaces})

    def _object(
        self, obj: ManagedObject, base: pulumi.ResourceOptions, deps: list[pulumi.Resource]
    ) -> KubernetesObject:
        opts = pulumi.ResourceOptions.merge(
            base,
            pulumi.ResourceOptions(
                depends_on=deps,
                protect=obj.protect,
                retain_on_delete=obj.retain_on_delete,
                delete_before_replace=obj.delete_before_replace,
                replace_on_changes=list(obj.replace_on_changes) or None,
            ),
        )
        return KubernetesObject(obj.key, obj.manifest, opts, patch=obj.patch)
