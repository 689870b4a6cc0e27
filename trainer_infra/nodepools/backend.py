"""The contract of a node-pool backend. A backend is one module exporting `BACKEND` plus one line in
nodepools/registry.py; mypy checks the module's object against this Protocol there."""

from __future__ import annotations

from typing import Any, Protocol

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject, ProviderResource
from trainer_infra.nodepools.labels import DEFAULT_TOPOLOGY, Taint
from trainer_infra.nodepools.model import NodePool, ResolvedPool


class NodePoolBackend(Protocol):
    @property
    def name(self) -> str:
        """The value of `nodePools[].backend`, and the key of the settings block."""

    @property
    def settings_model(self) -> type[StrictModel]:
        """The model of `nodePools[].<name>`."""

    @property
    def settings_hint(self) -> str:
        """An example settings block, shown when it is missing."""

    def default_topology(self) -> tuple[str, ...]:
        """Topology levels when the pool declares none."""

    def provided_levels(self) -> frozenset[str] | None:
        """The only level keys this backend's nodes carry (None: whatever the pool declares)."""

    def extra_taints(self) -> tuple[Taint, ...]:
        """Taints the backend itself puts on every node (flavors and runtimes must tolerate them)."""

    def node_count(self, pool: NodePool, settings: Any) -> int:
        """The most nodes the pool can have: what quota arithmetic counts."""

    def selector(self, settings: Any) -> dict[str, str]:
        """Labels the backend adopts nodes by (ResourceFlavor nodeLabels instead of the pool label); {} if none."""

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        """What the backend refuses, with paths under `pool.at`."""

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        """What the backend refuses across all its pools (e.g. one node in two pools)."""

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        """The objects the backend owns for one pool."""

    def shared_objects(self, pools: list[ResolvedPool], mirror: str | None) -> list[ManagedObject]:
        """Objects the backend owns once for all its pools (e.g. a controller)."""

    def resources(self, pool: ResolvedPool) -> list[ProviderResource]:
        """Resources of other Pulumi providers the backend creates for one pool (e.g. a cloud node group)."""


class BackendDefaults:
    """What most backends do: our own topology levels, nodes carry whatever levels the pool declares, no taints or
    selectors of the backend's own, nothing checked or owned across pools. A backend overrides what differs."""

    def default_topology(self) -> tuple[str, ...]:
        return DEFAULT_TOPOLOGY

    def provided_levels(self) -> frozenset[str] | None:
        return None

    def extra_taints(self) -> tuple[Taint, ...]:
        return ()

    def selector(self, settings: Any) -> dict[str, str]:
        return {}

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        return []

    def shared_objects(self, pools: list[ResolvedPool], mirror: str | None) -> list[ManagedObject]:
        return []

    def resources(self, pool: ResolvedPool) -> list[ProviderResource]:
        return []
