"""The node-pool backends. A new backend is one module exporting `BACKEND` plus one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.registry import Registry, model_with_settings
from trainer_infra.nodepools import aks, eks, gke, karpenter, kwok, static
from trainer_infra.nodepools.backend import NodePoolBackend
from trainer_infra.nodepools.model import NodePool

BACKENDS: Registry[NodePoolBackend] = Registry(
    kwok.BACKEND,
    static.BACKEND,
    karpenter.BACKEND,
    gke.BACKEND,
    eks.BACKEND,
    aks.BACKEND,
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


def _cloud_model() -> type[StrictModel]:
    """`cloud:`: one optional block per backend that declares a cluster (`cluster_model`)."""
    fields = {b.name: (b.cluster_model | None, None) for b in BACKENDS if b.cluster_model is not None}
    doc = "The cluster the cloud backends' pools join, per backend (provider settings, the cluster stack's outputs)."
    return model_with_settings("CloudConfig", StrictModel, fields, doc)


if TYPE_CHECKING:
    NodePoolConfig = NodePool
    CloudConfig = StrictModel
else:
    NodePoolConfig = _pool_model()
    CloudConfig = _cloud_model()
