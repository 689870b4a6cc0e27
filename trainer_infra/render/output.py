"""Write a capture as reviewable files: manifests.yaml, helm-releases.yaml, resources.json."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import yaml

from trainer_infra.core.objects import CHART_TYPE
from trainer_infra.core.upstream import kubernetes
from trainer_infra.manifests.meta import LEAVING
from trainer_infra.platform import crd_order
from trainer_infra.platform.helm import CRD_ORDER_INPUTS, CRD_TYPE
from trainer_infra.render.capture import Capture, Registration

KIND_ORDER = ("Namespace", "CustomResourceDefinition", "StorageClass", "ClusterRole", "ClusterRoleBinding")
_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):  # type: ignore[misc]
    """The safe dumper (block style, sorted keys), minus work a render never needs. Every document is a
    fresh tree decoded from the request, so there are no shared objects to anchor; plain str/dict/list
    nodes are built directly (what SafeRepresenter builds for them, without its per-node dispatch); a
    scalar's implicit tag is a pure function of its text, so it is resolved once per distinct string."""

    def represent_data(self, data: Any) -> Any:
        kind = type(data)
        if kind is str:
            return yaml.ScalarNode(_STR, data)
        if kind is dict and all(type(k) is str for k in data):
            items = sorted(data.items(), key=_first)
            return yaml.MappingNode(
                _MAP, [(yaml.ScalarNode(_STR, k), self.represent_data(v)) for k, v in items], flow_style=False
            )
        if kind is list:
            return yaml.SequenceNode(_SEQ, [self.represent_data(v) for v in data], flow_style=False)
        return super().represent_data(data)

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        cache: dict[Any, Any] = self.__dict__.setdefault("_resolved", {})
        if key not in cache:
            cache[key] = super().resolve(kind, value, implicit)
        return cache[key]


_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


def _first(item: tuple[str, Any]) -> str:
    return item[0]


@dataclass(frozen=True)
class Rendered:
    manifests: list[dict[str, Any]]
    releases: list[dict[str, Any]]
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]


def _short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if urn else ""


def _is_object(r: Registration) -> bool:
    return r.custom and r.type.startswith("kubernetes:") and r.type != CHART_TYPE and "apiVersion" in r.inputs


def manifest_sort_key(m: dict[str, Any]) -> tuple[int, str, str, str, str]:
    kind = str(m["kind"])
    rank = KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)
    md = m.get("metadata", {})
    return (rank, str(m["apiVersion"]), kind, str(md.get("namespace", "")), str(md.get("name", "")))


_STAND_IN = (
    f"---\napiVersion: {kubernetes.APIEXTENSIONS_API}\nkind: CustomResourceDefinition\n"
    "metadata:\n  name: crds.stand.in\n"
    "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: controller\n"
)


def _child_policy(r: Registration) -> dict[str, Any]:
    """Apply the chart's real transforms to a stand-in CRD: shows how chart CRDs are protected; and its
    post-renderer, when it is ours, to a stand-in CRD and Deployment: shows that workloads wait for the CRDs."""
    opts = pulumi.ResourceOptions()
    props: dict[str, Any] = {}
    for transform in r.child_transforms:
        args = pulumi.ResourceTransformArgs(custom=True, type_=CRD_TYPE, name="crd", props=props, opts=opts)
        result = transform(args)
        if result is not None:
            opts, props = result.opts, dict(result.props)
    crd = {"protect": bool(opts.protect), "retainOnDelete": bool(opts.retain_on_delete)}
    if props.get("metadata", {}).get("annotations", {}).get(LEAVING) == "true":
        crd["leavingFleet"] = True
    policy: dict[str, Any] = {"CustomResourceDefinition": crd}
    ours = r.inputs.get("postRenderer") == CRD_ORDER_INPUTS
    after = ours and crd_order.order_after_crds(_STAND_IN) != _STAND_IN
    policy["workloads"] = {"afterEveryCRD": after}
    return policy


def assemble(captured: Capture) -> Rendered:
    records = captured.registrations
    names = Counter(r.name for r in records)
    dupes = [n for n, c in names.items() if c > 1]
    if dupes:
        raise ValueError(f"resource names must be unique for a readable render: {dupes}")
    manifests = sorted((r.inputs for r in records if _is_object(r)), key=manifest_sort_key)
    releases = sorted(
        (
            {
                "name": r.name,
                "chart": r.inputs.get("chart"),
                "version": r.inputs.get("version"),
                "namespace": r.inputs.get("namespace"),
                "values": r.inputs.get("values", {}),
                **({"repository": r.inputs["repositoryOpts"]["repo"]} if "repositoryOpts" in r.inputs else {}),
            }
            for r in records
            if r.type == CHART_TYPE
        ),
        key=lambda x: str(x["name"]),
    )
    resources = []
    for r in sorted(records, key=lambda r: (r.type, r.name)):
        entry: dict[str, Any] = {
            "type": r.type,
            "name": r.name,
            "parent": _short(r.parent) or None,
            "dependsOn": sorted(_short(d) for d in r.dependencies),
            "protect": r.protect,
            "retainOnDelete": r.retain_on_delete,
            "deleteBeforeReplace": r.delete_before_replace,
        }
        if r.type == CHART_TYPE:
            entry["childPolicy"] = _child_policy(r)
        if r.replace_on_changes:  # only when set, so renders without it stay unchanged
            entry["replaceOnChanges"] = sorted(r.replace_on_changes)
        if r.type == "pulumi-python:dynamic:Resource":
            entry["inputs"] = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        elif r.custom and r.type.split(":")[0] not in ("kubernetes", "pulumi"):  # the cloud SDKs' (CloudResource)
            entry["inputs"] = r.inputs
            entry["provider"] = _short(r.provider.rsplit("::", 1)[0])
            entry["ignoreChanges"] = sorted(r.ignore_changes)
        elif r.type.startswith("pulumi:providers:") and r.type != "pulumi:providers:kubernetes":  # a cloud's provider
            entry["inputs"] = {k: v for k, v in r.inputs.items() if k != "version"}
        resources.append(entry)
    return Rendered(manifests, releases, resources, captured.stack_outputs)


def dump_yaml_documents(docs: list[dict[str, Any]]) -> str:
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=True, default_flow_style=False, explicit_start=True)


def write(rendered: Rendered, out: Path) -> None:
    """Write into a fresh directory beside `out`, then swap it in: `out` is either the previous render
    or this complete one, never a mix or a half-written file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write_files(rendered, staging)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            out.rename(old / out.name)
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def _write_files(rendered: Rendered, out: Path) -> None:
    (out / "manifests.yaml").write_text(dump_yaml_documents(rendered.manifests))
    (out / "helm-releases.yaml").write_text(
        yaml.dump({"releases": rendered.releases}, Dumper=_Dumper, sort_keys=True, default_flow_style=False)
    )
    (out / "resources.json").write_text(json.dumps(rendered.resources, indent=2, sort_keys=True) + "\n")


def summary(rendered: Rendered) -> str:
    kinds = Counter(str(m["kind"]) for m in rendered.manifests)
    n_obj, n_rel, n_res = len(rendered.manifests), len(rendered.releases), len(rendered.resources)
    lines = [f"{n_obj} objects, {n_rel} Helm releases, {n_res} Pulumi resources"]
    lines += [f"  {kind}: {n}" for kind, n in sorted(kinds.items())]
    if rendered.outputs:
        lines.append(f"  stack outputs: {', '.join(sorted(rendered.outputs))}")
    lines += [
        f"  helm {r['name']}: {r['chart']} {r['version']} (namespace {r['namespace']})" for r in rendered.releases
    ]
    return "\n".join(lines)
