"""Validate an object against a structural CRD schema the way the API server does on create:
defaults applied, unknown fields are errors (strict field validation), then every CEL rule in
`x-kubernetes-validations` evaluated with `self` bound to its node. Transition rules (`oldSelf`)
only run on update, so they are checked only when an old object is given."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import cel

from trainer_infra.core.errors import format_path

Path_ = tuple[str | int, ...]

OBJECT_META_FIELDS = {"name", "generateName", "namespace", "labels", "annotations", "finalizers", "ownerReferences"}
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def go_pattern(pattern: str) -> str:
    """RE2 (the API server's regex engine) accepts a flag group after `^`, e.g. `^(?i)[a-z]` in Kueue's
    AdmissionCheck schema; Python wants global flags first."""
    if pattern.startswith("^(?i)"):
        return "(?i)^" + pattern[len("^(?i)") :]
    return pattern


def _find(text: str, pattern: str) -> str:
    match = re.search(go_pattern(pattern), text)
    return match.group(0) if match else ""


#: The API server's CEL adds the strings extension and the regex library to the standard library
#: (k8s.io/apiserver/pkg/cel/library): the ones CRD rules use (Karpenter's `split`, `find`).
K8S_CEL_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "split": lambda text, sep: text.split(sep),
    "join": lambda items, sep="": sep.join(items),
    "substring": lambda text, start, end=None: text[start:end],
    "lowerAscii": lambda text: text.lower(),
    "find": _find,
    "findAll": lambda text, pattern: re.findall(go_pattern(pattern), text),
}


def _context(env: dict[str, Any]) -> cel.Context:
    ctx = cel.Context()
    for name, function in K8S_CEL_FUNCTIONS.items():
        ctx.add_function(name, function)
    for key, value in env.items():
        ctx.add_variable(key, value)
    return ctx


class SchemaValidator:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self._programs: dict[str, Any] = {}

    def _err(self, path: Path_, message: str) -> None:
        self.errors.append(f"{format_path(path) or '<root>'}: {message}")

    def validate(self, obj: Any, schema: dict[str, Any], old: Any = None) -> list[str]:
        self.errors = []
        self._walk(copy.deepcopy(obj), schema, (), old, root=True)
        return self.errors

    def _type_ok(self, value: Any, schema: dict[str, Any], path: Path_) -> bool:
        if value is None:
            if schema.get("nullable"):
                return True
            self._err(path, "null is not allowed")
            return False
        # JSON has no integer type: the API server accepts a whole float (2.0) where an integer is expected
        # (kube-openapi's type check, as go-openapi's IsFloat64AJSONInteger). The kubeflow SDK sends 2.0.
        whole = isinstance(value, float) and value.is_integer()
        if schema.get("x-kubernetes-int-or-string"):
            ok = (isinstance(value, (int, str)) and not isinstance(value, bool)) or whole
        else:
            expected = schema.get("type")
            checks = {
                "object": lambda v: isinstance(v, dict),
                "array": lambda v: isinstance(v, list),
                "string": lambda v: isinstance(v, str),
                "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or whole,
                "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
                "boolean": lambda v: isinstance(v, bool),
            }
            ok = expected is None or checks[expected](value)
        if not ok:
            self._err(path, f"expected {schema.get('type', 'int-or-string')}, found {type(value).__name__} {value!r}")
        return ok

    def _walk(self, value: Any, schema: dict[str, Any], path: Path_, old: Any, root: bool = False) -> None:
        if not self._type_ok(value, schema, path) or value is None:
            return
        self._scalar_checks(value, schema, path)
        if isinstance(value, dict):
            self._walk_object(value, schema, path, old, root)
        elif isinstance(value, list):
            self._walk_array(value, schema, path, old)
        self._cel(value, schema, path, old)

    def _walk_object(self, value: dict[str, Any], schema: dict[str, Any], path: Path_, old: Any, root: bool) -> None:
        props: dict[str, Any] = schema.get("properties", {})
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        for key in schema.get("required", []):
            if key not in value:
                self._err((*path, key), "required field is missing")
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            self._err(path, f"needs at least {schema['minProperties']} properties")
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            self._err(path, f"allows at most {schema['maxProperties']} properties")
        embedded = schema.get("x-kubernetes-embedded-resource") or root
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            old_item = old.get(key) if isinstance(old, dict) else None
            if root and key == "metadata":
                # The API server validates ObjectMeta itself; CRD schemas only add rules on top.
                self._object_meta(item, (*path, key))
                self._walk(
                    item, {**props.get(key, {}), "x-kubernetes-preserve-unknown-fields": True}, (*path, key), old_item
                )
            elif key in props:
                self._walk(item, props[key], (*path, key), old_item)
            elif embedded and key in ("apiVersion", "kind", "metadata"):
                continue
            elif isinstance(additional, dict):
                self._walk(item, additional, (*path, key), old_item)
            elif not (preserve or additional is True):
                self._err((*path, key), "unknown field (the API server would drop it; strict validation rejects it)")

    def _object_meta(self, meta: Any, path: Path_) -> None:
        if not isinstance(meta, dict):
            self._err(path, "expected an object")
            return
        for key in sorted(set(meta) - OBJECT_META_FIELDS):
            self._err((*path, key), "unknown ObjectMeta field")
        for key in ("labels", "annotations"):
            for k, v in (meta.get(key) or {}).items():
                if not isinstance(v, str):
                    self._err((*path, key, k), f"values must be strings, found {v!r}")
                if not LABEL_KEY.match(k):
                    self._err((*path, key, k), "not a valid qualified key")
        for k, v in (meta.get("labels") or {}).items():
            if isinstance(v, str) and not LABEL_VALUE.match(v):
                self._err((*path, "labels", k), f"not a valid label value: {v!r}")

    def _walk_array(self, value: list[Any], schema: dict[str, Any], path: Path_, old: Any) -> None:
        if "minItems" in schema and len(value) < schema["minItems"]:
            self._err(path, f"needs at least {schema['minItems']} items, found {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            self._err(path, f"allows at most {schema['maxItems']} items, found {len(value)}")
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "set" and len({repr(v) for v in value}) != len(value):
            self._err(path, "list-type set: duplicate items")
        if list_type == "map":
            keys = schema.get("x-kubernetes-list-map-keys", [])
            seen = [tuple(repr(v.get(k)) for k in keys) for v in value if isinstance(v, dict)]
            if len(set(seen)) != len(seen):
                self._err(path, f"list-type map: duplicate keys {keys}")
        items = schema.get("items")
        if items:
            for i, item in enumerate(value):
                old_item = old[i] if isinstance(old, list) and i < len(old) else None
                self._walk(item, items, (*path, i), old_item)

    def _scalar_checks(self, value: Any, schema: dict[str, Any], path: Path_) -> None:
        if "enum" in schema and value not in schema["enum"]:
            self._err(path, f"must be one of {schema['enum']}, found {value!r}")
        if isinstance(value, str):
            if "maxLength" in schema and len(value) > schema["maxLength"]:
                self._err(path, f"longer than {schema['maxLength']} characters")
            if "minLength" in schema and len(value) < schema["minLength"]:
                self._err(path, f"shorter than {schema['minLength']} characters")
            if "pattern" in schema and not re.search(go_pattern(schema["pattern"]), value):
                self._err(path, f"does not match {schema['pattern']}: {value!r}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                self._err(path, f"below the minimum {schema['minimum']}: {value}")
            if "maximum" in schema and value > schema["maximum"]:
                self._err(path, f"above the maximum {schema['maximum']}: {value}")

    def _cel(self, value: Any, schema: dict[str, Any], path: Path_, old: Any) -> None:
        for rule in schema.get("x-kubernetes-validations", []):
            expr = rule["rule"]
            transition = "oldSelf" in expr
            if transition and old is None:
                continue
            env = {"self": value, **({"oldSelf": old} if transition else {})}
            try:
                ok = cel.evaluate(expr, _context(env))
            except Exception as exc:
                self._err(path, f"CEL rule {expr!r} could not be evaluated: {exc}")
                continue
            if ok is not True:
                message = rule.get("message") or f"failed rule: {expr}"
                self._err(path, f"{message} (CEL: {expr})")
