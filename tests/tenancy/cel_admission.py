"""Evaluate a rendered ValidatingAdmissionPolicy the way the API server does, with a CEL interpreter.

Variables are evaluated in order and exposed as `variables.<name>`; each validation must be true, a failed
one reports its messageExpression (or its message). Kubernetes' CEL adds `join`, `split` and `substring` (strings
extension) to the standard library: registered here. The e2e suite runs the same policies in a real API server.
"""

from __future__ import annotations

from typing import Any

import cel


def _context(env: dict[str, Any]) -> cel.Context:
    ctx = cel.Context()
    ctx.add_function("join", lambda items, sep: sep.join(items))
    ctx.add_function("split", lambda text, sep: text.split(sep))
    ctx.add_function("substring", lambda text, start, end=None: text[start:end])
    for key, value in env.items():
        ctx.add_variable(key, value)
    return ctx


def refusals(
    policy: dict[str, Any],
    obj: dict[str, Any],
    *,
    namespace: str,
    old: dict[str, Any] | None = None,
    user: str = "alice@example.com",
    resource: str = "",
    operation: str | None = None,
    namespace_annotations: dict[str, str] | None = None,
    namespace_labels: dict[str, str] | None = None,
) -> list[str]:
    """Messages of every failed validation of ``policy`` for a request on ``obj`` (empty: admitted);
    ``resource`` is the plural the request is on, ``operation`` defaults to CREATE or UPDATE,
    ``namespace_annotations`` (and ``namespace_labels``) those of the request's namespace (``namespaceObject``;
    none: cluster-scoped)."""
    request = {
        "operation": operation or ("UPDATE" if old is not None else "CREATE"),
        "namespace": namespace,
        "resource": {"resource": resource},
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
    }
    namespace_object = (
        None
        if namespace_annotations is None
        else {"metadata": {"name": namespace, "annotations": namespace_annotations, "labels": namespace_labels or {}}}
    )
    env: dict[str, Any] = {
        "object": obj,
        "oldObject": old,
        "request": request,
        "namespaceObject": namespace_object,
        "variables": {},
    }
    for condition in policy["spec"].get("matchConditions", []):
        if cel.evaluate(condition["expression"], _context(env)) is not True:
            return []
    for var in policy["spec"].get("variables", []):
        env["variables"][var["name"]] = cel.evaluate(var["expression"], _context(env))
    out = []
    for validation in policy["spec"]["validations"]:
        if cel.evaluate(validation["expression"], _context(env)) is not True:
            try:
                out.append(str(cel.evaluate(validation["messageExpression"], _context(env))))
            except Exception:  # the API server falls back to `message` the same way
                out.append(validation["message"])
    return out
