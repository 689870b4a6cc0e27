"""A small static RBAC authorizer over rendered objects, to prove who may do what without a cluster.

It implements the RBAC authorizer's matching (kubernetes `pkg/registry/rbac/validation`): a
RoleBinding grants its role's rules inside its own namespace only; a ClusterRoleBinding grants a
ClusterRole's rules everywhere; a rule matches on apiGroup, resource (`pods/log` for subresources),
verb and, when set, resourceNames (which never match list/watch/create without a name). Not modelled:
aggregated ClusterRoles, non-resource URLs, the cluster's default bindings and other authorizers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass(frozen=True)
class Request:
    verb: str
    group: str
    resource: str  # `pods` or `pods/log`
    namespace: str | None
    name: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " (cluster scope)"
        name = f"/{self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{self.resource}{name}{where}"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...] = ()

    @classmethod
    def service_account(cls, namespace: str, name: str) -> Identity:
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")
        return cls(f"system:serviceaccount:{namespace}:{name}", groups)


def request_from_http(method: str, url: str) -> Request:
    """`GET /apis/trainer.kubeflow.org/v1alpha1/namespaces/a/trainjobs?watch=true` → watch trainjobs in a."""
    parsed = urlparse(url)
    parts = [p for p in parsed.path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if rest[0] == "namespaces" and len(rest) > 2:  # `/namespaces/a` alone is the Namespace object
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    watch = parse_qs(parsed.query).get("watch", ["false"])[0] == "true"
    verb = {
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete" if name else "deletecollection",
    }.get(method.upper(), "get" if name else ("watch" if watch else "list"))
    return Request(verb, group, resource, namespace, name)


def _matches(values: Iterable[str], wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values)


def _rule_allows(rule: dict[str, Any], req: Request) -> bool:
    if not _matches(rule.get("apiGroups", []), req.group) or not _matches(rule.get("verbs", []), req.verb):
        return False
    base = req.resource.split("/")[0]
    resources = rule.get("resources", [])
    if not (_matches(resources, req.resource) or ("/" in req.resource and f"{base}/*" in resources)):
        return False
    names = rule.get("resourceNames") or []
    return not names or (req.name is not None and req.name in names)


def _subject_is(subject: dict[str, Any], who: Identity) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name") == who.user)
    if kind == "Group":
        return subject.get("name") in who.groups
    if kind == "ServiceAccount":
        return who.user == f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
    return False


class Authorizer:
    def __init__(self, objects: Iterable[dict[str, Any]]) -> None:
        objs = list(objects)
        self.roles = {
            (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o.get("rules") or []
            for o in objs
            if o.get("kind") in ("Role", "ClusterRole")
        }
        self.bindings = [o for o in objs if o.get("kind") in ("RoleBinding", "ClusterRoleBinding")]

    def _rules(self, binding: dict[str, Any]) -> list[dict[str, Any]]:
        ref = binding["roleRef"]
        ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        rules: list[dict[str, Any]] = self.roles.get((ref["kind"], ns, ref["name"]), [])
        return rules

    def allowed(self, who: Identity, req: Request) -> bool:
        for binding in self.bindings:
            if not any(_subject_is(s, who) for s in binding.get("subjects") or []):
                continue
            scope = binding["metadata"].get("namespace")
            if binding["kind"] == "RoleBinding" and scope != req.namespace:
                continue
            if any(_rule_allows(rule, req) for rule in self._rules(binding)):
                return True
        return False

    def cluster_wide_writes(self) -> list[str]:
        """Verbs other than get/list/watch granted through ClusterRoleBindings (should be none)."""
        out = []
        for binding in self.bindings:
            if binding["kind"] != "ClusterRoleBinding":
                continue
            for rule in self._rules(binding):
                writes = sorted(set(rule.get("verbs", [])) - {"get", "list", "watch"})
                if writes:
                    out.append(f"{binding['metadata']['name']}: {writes} on {rule.get('resources')}")
        return out
