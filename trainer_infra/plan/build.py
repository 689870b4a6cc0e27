"""Stack config → Plan: the one place where every derivation is put together, in a fixed order."""

from __future__ import annotations

from trainer_infra.config.stack import StackConfig
from trainer_infra.plan.controllers import controller_plan
from trainer_infra.plan.model import ManagedObject, Plan

KIND_ORDER = ("Namespace", "CustomResourceDefinition", "StorageClass", "ClusterRole", "ClusterRoleBinding")


def _sort_key(obj: ManagedObject) -> tuple[int, str, str, str, str]:
    m = obj.manifest
    kind = str(m["kind"])
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    md = m["metadata"]
    return (rank, str(m["apiVersion"]), kind, str(md.get("namespace", "")), str(md["name"]))


def build_plan(cfg: StackConfig) -> Plan:
    releases, gates, objects = controller_plan(cfg)
    versions = cfg.components.resolved_versions()
    namespaces = cfg.components.resolved_namespaces()
    unique = {o.key: o for o in objects}
    return Plan(
        releases=tuple(releases),
        gates=tuple(gates),
        objects=tuple(sorted(unique.values(), key=_sort_key)),
        protect_crds=not cfg.allow_data_loss,
        outputs={
            "kubernetesVersion": cfg.kubernetes.version,
            "versions": versions,
            "namespaces": namespaces,
        },
    )
