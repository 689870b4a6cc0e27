"""Compare two renders (base → head): pure functions over the dicts `trainer-infra render` writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from trainer_infra.core.objects import CHART_TYPE, ManagedObject
from trainer_infra.diff.fields import MISSING, FieldChange, changed_under, field_changes
from trainer_infra.queues.derive import FLAVOR_IMMUTABLE, TOPOLOGY_IMMUTABLE

Op = Literal["added", "removed", "changed"]
DATA_KINDS = ("CustomResourceDefinition", "PersistentVolumeClaim")

# Fields the API server refuses to update, so a change means delete and re-create (a replace). Kueue's are
# the ones queues/derive.py marks replace-on-change (Kueue v0.19.2: Topology levels `self == oldSelf`;
# ResourceFlavor nodeLabels, tolerations and topologyName once topologyName is set); the core ones hold
# for every supported Kubernetes version.
IMMUTABLE: dict[str, tuple[str, ...]] = {
    "Topology": TOPOLOGY_IMMUTABLE,
    "ResourceFlavor": FLAVOR_IMMUTABLE,
    "PersistentVolumeClaim": (
        "spec.accessModes",
        "spec.storageClassName",
        "spec.volumeMode",
        "spec.volumeName",
        "spec.selector",
        "spec.dataSource",
    ),
    "StorageClass": ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"),
}


@dataclass(frozen=True)
class Render:
    """The three files of one render, as loaded data."""

    manifests: list[dict[str, Any]]
    releases: list[dict[str, Any]]
    resources: list[dict[str, Any]]


@dataclass(frozen=True)
class ObjectChange:
    label: str  # `ClusterQueue team-a`, `Namespace team-a`
    op: Op
    fields: tuple[FieldChange, ...] = ()
    added: dict[str, Any] | None = None  # the whole new object, for review


@dataclass(frozen=True)
class ReleaseChange:
    name: str
    op: Op
    old_version: str | None
    new_version: str | None
    fields: tuple[FieldChange, ...] = ()  # chart, namespace and values.* changes


@dataclass(frozen=True)
class ResourceChange:
    """A change to the Pulumi resource graph that the object and release sections do not show:
    readiness gates and other non-Kubernetes resources, protection and ordering options."""

    label: str
    op: Op
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class DataRisk:
    """A deletion or replacement of something protected, or protection being dropped."""

    label: str
    action: Literal["delete", "replace", "unprotect"]
    reason: str


@dataclass(frozen=True)
class StackDiff:
    objects: tuple[ObjectChange, ...]
    releases: tuple[ReleaseChange, ...]
    resources: tuple[ResourceChange, ...]
    risks: tuple[DataRisk, ...]

    @property
    def changed(self) -> bool:
        return bool(self.objects or self.releases or self.resources or self.risks)


def object_identity(m: dict[str, Any]) -> tuple[str, str, str, str]:
    """Same object across versions of its API: group (not version), kind, namespace, name."""
    group = str(m.get("apiVersion", "")).rpartition("/")[0]
    md = m.get("metadata") or {}
    return (group, str(m.get("kind")), str(md.get("namespace") or ""), str(md.get("name")))


def object_label(m: dict[str, Any]) -> str:
    _, kind, ns, name = object_identity(m)
    return f"{kind} {ns + '/' if ns else ''}{name}"


def _op(old: Any, new: Any) -> Op:
    return "added" if old is None else "removed" if new is None else "changed"


def diff_objects(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> list[ObjectChange]:
    old = {object_identity(m): m for m in base}
    new = {object_identity(m): m for m in head}
    out = []
    for ident in sorted(set(old) | set(new)):
        a, b = old.get(ident), new.get(ident)
        fields = tuple(field_changes(a, b)) if a is not None and b is not None else ()
        if a is None or b is None or fields:
            label = object_label(b if b is not None else a or {})
            out.append(ObjectChange(label, _op(a, b), fields, b if a is None else None))
    return out


def diff_releases(base: list[dict[str, Any]], head: list[dict[str, Any]]) -> list[ReleaseChange]:
    old = {str(r["name"]): r for r in base}
    new = {str(r["name"]): r for r in head}
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        strip = ("name", "version")
        fields = (
            tuple(
                field_changes(
                    {k: v for k, v in a.items() if k not in strip}, {k: v for k, v in b.items() if k not in strip}
                )
            )
            if a is not None and b is not None
            else ()
        )
        old_v = None if a is None else str(a.get("version"))
        new_v = None if b is None else str(b.get("version"))
        if a is None or b is None or fields or old_v != new_v:
            out.append(ReleaseChange(name, _op(a, b), old_v, new_v, fields))
    return out


def _resource_key(r: dict[str, Any]) -> tuple[str, str]:
    return (str(r["type"]), str(r["name"]))


def _resource_label(r: dict[str, Any], manifests: dict[str, dict[str, Any]]) -> str:
    m = manifests.get(str(r["name"]))
    if m is not None:
        return object_label(m)
    rtype = str(r["type"])
    kind = "chart" if rtype == CHART_TYPE else "dynamic resource" if ":dynamic:" in rtype else rtype
    return f"{kind} {r['name']}"


def _by_resource_name(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {ManagedObject(m).key: m for m in manifests}


def _protected(r: dict[str, Any]) -> bool:
    return bool(r.get("protect") or r.get("retainOnDelete"))


def _crd_policy(r: dict[str, Any]) -> dict[str, bool]:
    return dict((r.get("childPolicy") or {}).get("CustomResourceDefinition") or {})


def _replace_triggers(r: dict[str, Any], kind: str) -> tuple[str, ...]:
    declared = tuple(str(p).replace("[*]", "") for p in r.get("replaceOnChanges") or ())
    return declared + IMMUTABLE.get(kind, ())


def diff_resources(base: Render, head: Render) -> tuple[list[ResourceChange], list[DataRisk]]:
    """Resource graph changes and data risks. Pulumi identifies a resource by (type, name): a
    changed apiVersion or name is a delete of the old resource and a create of a new one."""
    old = {_resource_key(r): r for r in base.resources}
    new = {_resource_key(r): r for r in head.resources}
    old_m, new_m = _by_resource_name(base.manifests), _by_resource_name(head.manifests)
    changes: list[ResourceChange] = []
    risks: list[DataRisk] = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        label = _resource_label(b if b is not None else a or {}, new_m if b is not None else old_m)
        kind = (old_m.get(key[1]) or new_m.get(key[1]) or {}).get("kind", "")
        shown_elsewhere = key[0] == CHART_TYPE or key[1] in old_m or key[1] in new_m
        if a is not None and b is None:
            if _protected(a) or kind in DATA_KINDS:
                opts = [o for o in ("protect", "retainOnDelete") if a.get(o)]
                how = f" ({', '.join(opts)})" if opts else ""
                risks.append(DataRisk(label, "delete", f"removed from the program{how}"))
            if _crd_policy(a).get("protect"):
                risks.append(
                    DataRisk(
                        label,
                        "delete",
                        "chart removed: its protected CRDs (and every object of their kinds) go with it",
                    )
                )
            if not shown_elsewhere:
                changes.append(ResourceChange(label, "removed"))
            continue
        if a is None or b is None:
            if not shown_elsewhere:
                changes.append(ResourceChange(label, "added"))
            continue
        fields = field_changes(a, b)
        if fields:
            changes.append(ResourceChange(label, "changed", tuple(fields)))
        risks += _risks_of_update(label, a, b, kind, old_m.get(key[1]), new_m.get(key[1]))
    return changes, risks


def _risks_of_update(
    label: str, a: dict[str, Any], b: dict[str, Any], kind: str, old_m: Any, new_m: Any
) -> list[DataRisk]:
    risks = []
    dropped = [o for o in ("protect", "retainOnDelete") if a.get(o) and not b.get(o)]
    if dropped:
        risks.append(DataRisk(label, "unprotect", f"{' and '.join(dropped)} dropped"))
    if _crd_policy(a).get("protect") and not _crd_policy(b).get("protect"):
        risks.append(DataRisk(label, "unprotect", "the chart's CRDs lose protect"))
    if (_protected(a) or kind in DATA_KINDS) and old_m is not None and new_m is not None:
        triggers = _replace_triggers(b, kind)
        hits = changed_under(field_changes(old_m, new_m), triggers)
        if hits:
            fields = ", ".join(sorted({h.path for h in hits}))
            risks.append(DataRisk(label, "replace", f"replace-triggering field(s) changed: {fields}"))
    return risks


def diff_renders(base: Render, head: Render) -> StackDiff:
    resources, risks = diff_resources(base, head)
    return StackDiff(
        objects=tuple(diff_objects(base.manifests, head.manifests)),
        releases=tuple(diff_releases(base.releases, head.releases)),
        resources=tuple(resources),
        risks=tuple(risks),
    )


__all__ = [
    "MISSING",
    "DataRisk",
    "ObjectChange",
    "ReleaseChange",
    "Render",
    "ResourceChange",
    "StackDiff",
    "diff_renders",
]
