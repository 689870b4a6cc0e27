"""Every field of a v1 job kind, as field-table patterns, read from the upstream CRD schema (ObjectMeta, which
CRD schemas leave open, from the Kubernetes API models)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kubernetes.client import V1ObjectMeta

from trainer_infra.migrate.kinds import REPLICA_FIELDS


def object_meta_fields() -> list[str]:
    return sorted(V1ObjectMeta.attribute_map.values())


def fields(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(pattern, schema) of every property under the root, depth first. Maps whose keys are user data
    (labels, nodeSelector, resource lists) are fields themselves; the replica-spec map's keys become `*`."""
    for name in object_meta_fields():
        yield f"metadata.{name}", {}
    yield from _walk(schema, "", root=True)


def _walk(schema: dict[str, Any], pattern: str, root: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    if schema.get("type") == "array":
        item = f"{pattern}[]"
        yield from _walk(schema.get("items") or {}, item)
        return
    props: dict[str, Any] = schema.get("properties") or {}
    for key, sub in props.items():
        if root and key == "metadata":
            continue
        if pattern == "spec" and key in REPLICA_FIELDS:
            path = "spec.{replicas}"
            yield path, sub
            yield from _walk(sub.get("additionalProperties") or {}, f"{path}.*")
            continue
        path = f"{pattern}.{key}" if pattern else key
        yield path, sub
        yield from _walk(sub, path)
