"""Upstream webhook configurations, rewritten to reach controllers running on loopback.

The upstream manifests point at in-cluster Services; like envtest and kwokctl we
replace each ``clientConfig.service`` with ``url: https://127.0.0.1:<port><path>``
and our CA as ``caBundle``. The files are read from the shared folder at run
time (never copied into the repo); their kustomize JSON patches are applied here.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.upstream import kubernetes

Obj = dict[str, Any]

#: upstream kustomize prefixes generic names (``kueue-``, ``jobset-``); we do the same.
_GENERIC_NAMES = {"mutating-webhook-configuration", "validating-webhook-configuration"}
MANAGED_BY = {kubernetes.APP_MANAGED_BY: "trainer-platform-e2e"}


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.lstrip("/").split("/")]


def apply_json_patch(doc: Obj, ops: list[Obj]) -> Obj:
    """Apply the RFC 6902 subset kustomize patches use here (add, replace, remove)."""
    result = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = result
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            elif kind == "replace":
                parent[index] = copy.deepcopy(op["value"])
            elif kind == "remove":
                del parent[index]
            else:
                raise ValueError(f"unsupported JSON patch op {kind!r}")
        elif kind in ("add", "replace"):
            if kind == "replace" and last not in parent:
                raise KeyError(f"JSON patch replace of missing path {op['path']}")
            parent[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del parent[last]
        else:
            raise ValueError(f"unsupported JSON patch op {kind!r}")
    return result


def load_upstream_webhooks(folder: Path) -> list[Obj]:
    """Webhook configurations of one component version, with its kustomize patches applied."""
    manifests = folder / "webhook-manifests.yaml"
    if not manifests.exists():
        raise FileNotFoundError(f"no upstream webhook manifests at {manifests}")
    docs = [d for d in yaml.safe_load_all(manifests.read_text()) if d]
    patches: dict[str, list[Obj]] = {"MutatingWebhookConfiguration": [], "ValidatingWebhookConfiguration": []}
    for patch_file in sorted(folder.glob("webhook-*patch*.yaml")):
        kind = "MutatingWebhookConfiguration" if "mutating" in patch_file.name else "ValidatingWebhookConfiguration"
        patches[kind].extend(yaml.safe_load(patch_file.read_text()) or [])
    return [apply_json_patch(d, patches.get(d["kind"], [])) for d in docs]


def load_kustomized_webhooks(folder: Path) -> list[Obj]:
    """Webhook configurations of a kustomize folder (``manifests.yaml`` + the JSON patches its
    ``kustomization.yaml`` lists by target kind), as LeaderWorkerSet ships them in its module."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text()) or {}
    docs = [d for d in yaml.safe_load_all((folder / "manifests.yaml").read_text()) if d]
    patches: dict[str, list[Obj]] = {}
    for patch in kustomization.get("patches") or []:
        kind = (patch.get("target") or {}).get("kind", "")
        patches.setdefault(kind, []).extend(yaml.safe_load((folder / patch["path"]).read_text()) or [])
    return [apply_json_patch(d, patches.get(d["kind"], [])) for d in docs]


def localize(configs: list[Obj], component: str, port: int, ca_pem: bytes) -> list[Obj]:
    """Point every webhook at ``https://127.0.0.1:<port>`` with our CA; give unique names."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    out: list[Obj] = []
    for cfg in configs:
        cfg = copy.deepcopy(cfg)
        meta = cfg.setdefault("metadata", {})
        if meta.get("name") in _GENERIC_NAMES:
            meta["name"] = f"{component}-{meta['name']}"
        meta.setdefault("labels", {}).update(MANAGED_BY)
        for hook in cfg.get("webhooks", []):
            service = hook.get("clientConfig", {}).get("service") or {}
            path = service.get("path", "/")
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
        out.append(cfg)
    return out
