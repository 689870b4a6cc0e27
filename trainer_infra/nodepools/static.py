"""static backend: existing nodes (on-prem, hand-built clusters).

Two ways to name the nodes:
- `nodes: [{name, topology}]`: we server-side-apply the pool's labels, topology labels and taints to
  each named node as a `NodePatch`. Owns: only those label keys and (with `applyTaints`) the taint list;
  removing the pool removes exactly what we applied. Never touches: the Node object itself (never created
  or deleted), any other label, its status. The Node API keeps taints as one atomic list: if another
  manager owns the node's taints (kubelet `--register-with-taints`, `kubectl taint`), the apply fails
  with a field-manager conflict instead of overwriting them; then set `applyTaints: false` and declare
  the existing taints in `taints` (they still drive flavor and runtime tolerations).
- `nodeSelector: {…}`: adopt nodes that already carry these labels (and the declared taints and topology
  labels). Owns nothing on the nodes; the ResourceFlavor selects on the selector. `size.count` says how
  many nodes that is, for the quota arithmetic.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.types import DnsSubdomain, LabelKey, LabelValue
from trainer_infra.core.upstream import kubernetes
from trainer_infra.nodepools.backend import BackendDefaults
from trainer_infra.nodepools.labels import HOSTNAME
from trainer_infra.nodepools.model import NodePool, ResolvedPool


class StaticNode(StrictModel):
    name: DnsSubdomain
    topology: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=f"Value of every topology level of the pool except {kubernetes.HOSTNAME_LABEL}.",
    )


class StaticPool(StrictModel):
    nodes: list[StaticNode] = Field(default_factory=list, description="Named nodes we label (and taint).")
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Adopt already-labelled nodes instead (we touch nothing on them)."
    )
    apply_taints: bool = Field(default=True, description="Also apply the pool's taints to the named nodes.")


def node_names(pool: NodePool) -> list[str]:
    """The nodes a static pool names (none for a `nodeSelector` pool)."""
    settings = pool.settings
    return [n.name for n in settings.nodes] if isinstance(settings, StaticPool) else []


def static_node_patches(pool: ResolvedPool) -> list[ManagedObject]:
    settings: StaticPool = pool.settings
    objects = []
    for node in settings.nodes:
        labels = {**pool.node_labels, **{k: v for k, v in node.topology.items() if k != HOSTNAME}}
        manifest: dict[str, object] = {
            "apiVersion": "v1",
            "kind": "Node",
            # No ownership labels here: they would be ours on a node we do not own.
            "metadata": {"name": node.name, "labels": dict(sorted(labels.items()))},
        }
        if settings.apply_taints:
            manifest["spec"] = {"taints": [t.as_k8s() for t in pool.taints]}
        objects.append(ManagedObject(manifest, patch=True))
    return objects


class StaticBackend(BackendDefaults):
    """Existing nodes: named ones we label, or adopted ones selected by labels."""

    name = "static"
    settings_model = StaticPool
    settings_hint = "static: {nodes: [...]} or {nodeSelector: {...}}"

    def node_count(self, pool: NodePool, settings: Any) -> int:
        if isinstance(settings, StaticPool) and settings.nodes:
            return len(settings.nodes)
        return pool.size.count or 0

    def selector(self, settings: Any) -> dict[str, str]:
        return dict(settings.node_selector) if isinstance(settings, StaticPool) else {}

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        st: StaticPool = pool.settings
        at, levels = pool.at, pool.topology
        issues = []
        if bool(st.nodes) == bool(st.node_selector):
            issues.append(ConfigIssue(f"{at}.static", "set exactly one of nodes, nodeSelector"))
        for j, node in enumerate(st.nodes):
            missing = [k for k in levels if k != HOSTNAME and k not in node.topology]
            unknown = [k for k in node.topology if k not in levels]
            if missing:
                issues.append(
                    ConfigIssue(
                        f"{at}.static.nodes[{j}].topology",
                        "the static backend cannot provide these levels without a value per node",
                        ", ".join(missing),
                    )
                )
            if unknown:
                issues.append(
                    ConfigIssue(f"{at}.static.nodes[{j}].topology", "not a level of the pool", ", ".join(unknown))
                )
        size = pool.config.size
        if st.node_selector and size.count is None:
            issues.append(ConfigIssue(f"{at}.size.count", "required for nodeSelector pools (quota arithmetic)"))
        if st.nodes and size.count is not None and size.count != len(st.nodes):
            message = f"has no effect: the pool has the {len(st.nodes)} named nodes"
            issues.append(ConfigIssue(f"{at}.size.count", message, str(size.count), "drop size.count"))
        if size.min is not None or size.max is not None:
            hint = "static pools do not scale: drop size.min/max"
            issues.append(ConfigIssue(f"{at}.size", "size.min/max have no effect on a static pool", None, hint))
        return issues

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        """A named node belongs to one pool only."""
        issues = []
        owners: dict[str, str] = {}
        for pool in pools:
            settings: StaticPool = pool.settings
            for j, node in enumerate(settings.nodes):
                if node.name in owners:
                    other = owners[node.name]
                    where = "listed twice in this pool" if other == pool.name else f"already in pool {other}"
                    issues.append(ConfigIssue(f"{pool.at}.static.nodes[{j}]", f"node is {where}", node.name))
                owners.setdefault(node.name, pool.name)
        return issues

    def kubelet_unmanaged(self, pool: ResolvedPool) -> bool:
        return True  # existing nodes: their kubelet is configured by whoever made them

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return static_node_patches(pool)


BACKEND = StaticBackend()
