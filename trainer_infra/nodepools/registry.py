"""The node-pool backends. A new backend is one module exporting `BACKEND` plus one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from trainer_infra.core.registry import Registry, model_with_settings
from trainer_infra.nodepools import karpenter, kwok, static
from trainer_infra.nodepools.backend import NodePoolBackend
from trainer_infra.nodepools.model import NodePool

BACKENDS: Registry[NodePoolBackend] = Registry(
    kwok.BACKEND,
    static.BACKEND,
    karpenter.BACKEND,
)


def _pool_model() -> type[NodePool]:
    """`NodePool` plus `backend: <one of the registered names>` and one optional settings block per backend."""
    names = BACKENDS.names()
    fields = {
        "backend": (
            Literal[names],
            Field(description=" or ".join(names) + " (nodepools/registry.py)."),
        ),
        **{b.name: (b.settings_model | None, None) for b in BACKENDS},
    }
    model: type[NodePool] = model_with_settings("NodePoolConfig", NodePool, fields)
    return model


if TYPE_CHECKING:
    NodePoolConfig = NodePool
else:
    NodePoolConfig = _pool_model()
