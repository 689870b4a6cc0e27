"""Read the v1 jobs of a live cluster through the user's kubeconfig: list calls only, nothing is changed.

Each kind is listed at the versions the Training Operator (kubeflow.org/v1) and the MPI Operator
(kubeflow.org/v2beta1 MPIJob) serve; a kind whose CRD is not installed is skipped. An object served at two
versions is read once (by uid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from trainer_infra.core.upstream.training_operator import MPIJOB_API
from trainer_infra.migrate.kinds import KINDS
from trainer_infra.migrate.source import Document


class Lister(Protocol):
    """The two read calls of kubernetes.client.CustomObjectsApi that the inventory uses."""

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]: ...

    def list_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str
    ) -> dict[str, Any]: ...


class ClusterReadError(Exception):
    """A list call the inventory needs was refused or failed: an inventory with holes would mislead."""


@dataclass(frozen=True)
class Skipped:
    what: str
    why: str


def _plural(kind: str) -> str:
    return kind.lower() + "s"


def read_cluster(api: Lister, namespaces: list[str]) -> tuple[list[Document], list[Skipped]]:
    """Every v1 job in `namespaces` (all namespaces when empty), MPIJob v2beta1 first."""
    docs: list[Document] = []
    skipped: list[Skipped] = []
    seen: set[str] = set()
    order = sorted(KINDS, key=lambda k: (k.kind, k.api_version != MPIJOB_API))
    for kind in order:
        group, version = kind.api_version.split("/")
        plural = _plural(kind.kind)
        for ns in namespaces or [""]:
            where = f"cluster:{kind.api_version}/{plural}" + (f" in {ns}" if ns else "")
            try:
                listed = (
                    api.list_namespaced_custom_object(group, version, ns, plural)
                    if ns
                    else api.list_cluster_custom_object(group, version, plural)
                )
            except ApiException as exc:
                if exc.status == 404:
                    skipped.append(Skipped(where, "not served by this cluster (CRD or version not installed)"))
                    break
                hint = " (the kubeconfig's user needs list on it)" if exc.status in (401, 403) else ""
                raise ClusterReadError(f"{where}: {exc.status} {exc.reason}{hint}") from None
            for i, item in enumerate(listed.get("items") or []):
                uid = str((item.get("metadata") or {}).get("uid", ""))
                if uid and uid in seen:
                    continue
                seen.add(uid)
                item.setdefault("apiVersion", kind.api_version)
                item.setdefault("kind", kind.kind)
                docs.append(Document(where, i, item))
    return docs, skipped
