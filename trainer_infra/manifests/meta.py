"""Object metadata every manifest shares, so ownership is visible with `kubectl get -l`."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.upstream import kubernetes

# Shared label vocabulary (policies read it too, so it lives here with no dependencies).
TEAM_LABEL = "trainer-platform.io/team"
# On a decommissioned team's namespace and claim: reviewers see it in the diff, and the
# data-is-protected policy rule knows the missing protection is deliberate.
DECOMMISSIONED = "trainer-platform.io/decommissioned"
# On what a draining fleet worker keeps that was protected: unprotected but retained, so that removing the worker
# from the stack makes Pulumi forget it and leaves it in the cluster; the policy rule reads the mark too.
LEAVING = "trainer-platform.io/leaving-fleet"

PART_OF = {kubernetes.APP_PART_OF: "trainer-platform", kubernetes.APP_MANAGED_BY: "trainer-platform"}


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
