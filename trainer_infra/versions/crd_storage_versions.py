"""`trainer-infra storage-versions`: which CRDs of the platform's components still list an API version other than
their storage version in `status.storedVersions`, and (`--migrate`) the documented Kubernetes way to clear it.

A release that stops serving a version (Kueue 0.20: `kueue.x-k8s.io/v1beta1`) or drops it (0.21) needs every
object still stored in it rewritten, and the API server refuses a CRD without a version `storedVersions` lists.
Objects are only re-encoded at the storage version on a write, and an object nobody writes (a ResourceFlavor, a
Topology, a long-running Workload) stays as it was stored (kueue#8020). The migration (Kubernetes docs,
"Versions in CustomResourceDefinitions", upgrade existing objects to a new stored version):

1. read every object of the CRD at its storage version and write it back unchanged (a no-op update: the API server
   stores it re-encoded, or leaves it when it already is), retrying on a conflict with the object read again;
2. only when all were written: set `status.storedVersions` to the storage version alone.

It runs as the admin, after the `up` that installed the release (the runbook, docs/versions.md): not inside
`pulumi up`, where it would write every team's Workloads as part of the platform's deployment. An object created
meanwhile is stored at the storage version anyway. Pure planning here; ``KubeCluster`` is the real client.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from trainer_infra.versions.matrix import MATRIX

Obj = dict[str, Any]
#: conflicts on one object (a controller writing it meanwhile) before the migration gives up
RETRIES = 5


def component_groups() -> tuple[str, ...]:
    """The API groups of the CRDs the matrix's components install (``<plural>.<group>``)."""
    return tuple(
        sorted({crd.split(".", 1)[1] for c in MATRIX.components.values() for r in c.releases for crd in r.crds})
    )


@dataclass(frozen=True)
class Stale:
    """A CRD whose `status.storedVersions` lists more than its storage version."""

    name: str
    group: str
    plural: str
    storage: str
    stored: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.name}: storedVersions {list(self.stored)}, storage version {self.storage}"


def stale_crds(crds: Iterable[Mapping[str, Any]], groups: Iterable[str]) -> list[Stale]:
    """The CRDs of ``groups`` that still list a version other than their storage version, by name."""
    wanted, found = set(groups), []
    for crd in crds:
        spec = crd.get("spec") or {}
        if spec.get("group") not in wanted:
            continue
        storage = next(v["name"] for v in spec.get("versions", []) if v.get("storage"))
        stored = tuple((crd.get("status") or {}).get("storedVersions") or ())
        if stored != (storage,):
            name = crd["metadata"]["name"]
            found.append(Stale(name, spec["group"], spec["names"]["plural"], storage, stored))
    return sorted(found, key=lambda s: s.name)


class ConflictError(Exception):
    """The object changed since it was read (HTTP 409)."""


class GoneError(Exception):
    """The object was deleted since it was listed (HTTP 404)."""


class Cluster(Protocol):
    def crds(self) -> list[Obj]: ...
    def objects(self, group: str, version: str, plural: str) -> list[Obj]: ...
    def read(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> Obj: ...
    def replace(self, group: str, version: str, plural: str, obj: Obj) -> None: ...
    def set_stored_versions(self, crd: str, versions: list[str]) -> None: ...


def rewrite(cluster: Cluster, stale: Stale) -> int:
    """Write every object of ``stale`` back unchanged at the storage version; the number written."""
    written = 0
    for obj in cluster.objects(stale.group, stale.storage, stale.plural):
        meta = obj["metadata"]
        for attempt in range(RETRIES):
            try:
                cluster.replace(stale.group, stale.storage, stale.plural, obj)
                written += 1
                break
            except GoneError:
                break
            except ConflictError:
                if attempt == RETRIES - 1:
                    raise
                try:
                    obj = cluster.read(stale.group, stale.storage, stale.plural, meta.get("namespace"), meta["name"])
                except GoneError:
                    break
    return written


def migrate(cluster: Cluster, groups: Iterable[str], say: Callable[[str], None] = print) -> list[Stale]:
    """Migrate every stale CRD of ``groups``: its objects first, then its `status.storedVersions`; the CRDs it
    migrated. A failure on one object stops before that CRD's status is touched."""
    stale = stale_crds(cluster.crds(), groups)
    for crd in stale:
        written = rewrite(cluster, crd)
        cluster.set_stored_versions(crd.name, [crd.storage])
        before = list(crd.stored)
        say(f"{crd.name}: {written} objects rewritten at {crd.storage}; storedVersions {before} → {[crd.storage]}")
    return stale


class KubeCluster:
    """``Cluster`` through the Kubernetes client and a kubeconfig (``KUBECONFIG`` or ``--kubeconfig``)."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        from kubernetes import client, config

        self._client = client
        self._api = config.new_client_from_config(config_file=kubeconfig, context=context)
        self._custom = client.CustomObjectsApi(self._api)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except self._client.ApiException as exc:
            if exc.status == 409:
                raise ConflictError(str(exc.reason)) from exc
            if exc.status == 404:
                raise GoneError(str(exc.reason)) from exc
            raise

    def crds(self) -> list[Obj]:
        found = self._call(self._client.ApiextensionsV1Api(self._api).list_custom_resource_definition)
        return list(self._api.sanitize_for_serialization(found)["items"])

    def objects(self, group: str, version: str, plural: str) -> list[Obj]:
        return list(self._call(self._custom.list_cluster_custom_object, group, version, plural)["items"])

    def read(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> Obj:
        if namespace:
            return dict(self._call(self._custom.get_namespaced_custom_object, group, version, namespace, plural, name))
        return dict(self._call(self._custom.get_cluster_custom_object, group, version, plural, name))

    def replace(self, group: str, version: str, plural: str, obj: Obj) -> None:
        meta = obj["metadata"]
        if meta.get("namespace"):
            self._call(
                self._custom.replace_namespaced_custom_object,
                group,
                version,
                meta["namespace"],
                plural,
                meta["name"],
                obj,
            )
        else:
            self._call(self._custom.replace_cluster_custom_object, group, version, plural, meta["name"], obj)

    def set_stored_versions(self, crd: str, versions: list[str]) -> None:
        patch = [{"op": "replace", "path": "/status/storedVersions", "value": versions}]
        api = self._client.ApiextensionsV1Api(self._api)
        self._call(api.patch_custom_resource_definition_status, crd, patch)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: KUBECONFIG, then ~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context (default: its current one)")
    p.add_argument(
        "--migrate",
        action="store_true",
        help="rewrite every object of a listed CRD at its storage version, then drop the other versions from its "
        "status.storedVersions (without: only report)",
    )


def cmd_storage_versions(args: argparse.Namespace, connect: Callable[..., Cluster] = KubeCluster) -> int:
    groups = component_groups()
    try:
        cluster = connect(args.kubeconfig, args.context)
        if args.migrate:
            migrate(cluster, groups)
        stale = stale_crds(cluster.crds(), groups)
    except ConflictError as exc:
        print(f"trainer-infra storage-versions: an object kept changing ({exc}); run it again", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"trainer-infra storage-versions: {type(exc).__name__}: {str(exc)[:500]}", file=sys.stderr)
        return 2
    for crd in stale:
        print(crd.describe())
    if stale:
        print(f"{len(stale)} CRDs of {', '.join(groups)} list an old version: `--migrate` (docs/versions.md)")
        return 1
    print(f"every CRD of {', '.join(groups)} lists only its storage version")
    return 0
