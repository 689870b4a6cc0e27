"""Object metadata every manifest shares, so ownership is visible with `kubectl get -l`."""

from __future__ import annotations

from typing import Any

PART_OF = {"app.kubernetes.io/part-of": "trainer-platform", "app.kubernetes.io/managed-by": "trainer-platform"}


def metadata(
    name: str,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted({**PART_OF, **(labels or {})}.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(name, labels=labels)}
