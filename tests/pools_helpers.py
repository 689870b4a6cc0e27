"""Builders for node-pool / team stack configs used by the pool and queue tests."""

from __future__ import annotations

import copy
from typing import Any

from tests.helpers import MINIMAL
from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.stack.validate import validate

#: Karpenter pools scale from zero, which Kueue's topology-aware scheduling refuses (nodepools/checks.py)
TAS_OFF: dict[str, Any] = {"kueue": {"tas": {"enabled": False}}}


def karpenter_stack(
    pools: list[dict[str, Any]], teams: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    """A stack of karpenter pools: topology-aware scheduling off, as Karpenter needs."""
    return stack(pools, teams, components=TAS_OFF, **extra)


def kwok_pool(name: str = "h100", layout: list[int] | None = None, gpus: int = 8, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"cpu": "96", "memory": "1536Gi"}
    if gpus:
        node["accelerator"] = {"count": gpus}
    return {"name": name, "backend": "kwok", "node": node, "kwok": {"layout": layout or [2, 2, 2]}, **extra}


def stack(pools: list[dict[str, Any]], teams: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    raw = copy.deepcopy(MINIMAL)
    raw.update({"nodePools": pools, "teams": teams or [], **extra})
    return raw


def issues(raw: dict[str, Any]) -> list[ConfigIssue]:
    try:
        validate(raw)
    except ConfigError as exc:
        return list(exc.issues)
    return []
