"""CEL building blocks shared by the admission rules and the policy that holds them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: where a policy reads the request namespace's annotations (the team allow-lists)
ANNOTATIONS = "namespaceObject.metadata.annotations"
#: the object's name ('' while the API server has yet to generate it)
OBJECT_NAME = "(has(object.metadata.name) ? object.metadata.name : '')"


def lit(value: Any) -> str:
    """A CEL literal (JSON strings, lists and maps are valid CEL)."""
    return json.dumps(value, sort_keys=True)


def guarded(*paths: str) -> str:
    """Every path is set (CEL `has()` of each, in order, so a deeper one is only read under its parent)."""
    return " && ".join(f"has({p})" for p in paths)


def has_annotation(key: str) -> str:
    return f"has({ANNOTATIONS}) && '{key}' in {ANNOTATIONS}"


def initializer_envs(holds: Callable[[str], str]) -> str:
    """CEL: `holds(env)` is true of the env list of each initializer a TrainJob sets (`spec.initializer.dataset`,
    `.model`); true where there is none."""
    i = "object.spec.initializer"
    per = [f"(!has({i}.{step}) || !has({i}.{step}.env) || {holds(f'{i}.{step}.env')})" for step in ("dataset", "model")]
    return f"!has({i}) || ({' && '.join(per)})"
