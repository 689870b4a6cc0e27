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

from typing import TYPE_CHECKING

from pydantic import Field

from trainer_infra.config.base import StrictModel
from trainer_infra.config.types import DnsSubdomain
from trainer_infra.nodepools.labels import HOSTNAME, LabelKey, LabelValue
from trainer_infra.plan.model import ManagedObject

if TYPE_CHECKING:
    from trainer_infra.nodepools.pool import NodePoolConfig

FIELD_MANAGER_NOTE = "trainer-platform applies only the labels and taints of its node pool"


class StaticNode(StrictModel):
    name: DnsSubdomain
    topology: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Value of every topology level of the pool except kubernetes.io/hostname."
    )


class StaticPool(StrictModel):
    nodes: list[StaticNode] = Field(default_factory=list, description="Named nodes we label (and taint).")
    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Adopt already-labelled nodes instead (we touch nothing on them)."
    )
    apply_taints: bool = Field(default=True, description="Also apply the pool's taints to the named nodes.")


def static_node_patches(pool: NodePoolConfig) -> list[ManagedObject]:
    assert pool.static is not None
    objects = []
    for node in pool.static.nodes:
        labels = {**pool.node_labels(), **{k: v for k, v in node.topology.items() if k != HOSTNAME}}
        manifest: dict[str, object] = {
            "apiVersion": "v1",
            "kind": "Node",
            # No ownership labels here: they would be ours on a node we do not own.
            "metadata": {"name": node.name, "labels": dict(sorted(labels.items()))},
        }
        if pool.static.apply_taints:
            manifest["spec"] = {"taints": [t.as_k8s() for t in pool.resolved_taints]}
        objects.append(ManagedObject(manifest, patch=True))
    return objects
