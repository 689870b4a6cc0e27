"""kwok backend: simulated GPU nodes for local stacks, demos and tests.

Owns: the kwok controller (namespace `kwok-system`, its ServiceAccount, ClusterRole, binding and
Deployment, image `registry.k8s.io/kwok/kwok` at `KWOK_VERSION`) and one fake `Node` per layout slot. The nodes
carry kwok's annotation `kwok.x-k8s.io/node: fake`, which is the only thing the controller manages
(`--manage-nodes-with-annotation-selector`), and kwok's taint `kwok.x-k8s.io/node=fake:NoSchedule` so
no real pod lands on them unless it is meant to (flavors and runtimes tolerate it).
Never touches: real nodes, pods on real nodes. The fake nodes hold no user data: removing the pool
deletes them.

Without `--enable-crds=Stage` the controller uses its built-in node and pod stages (nodes turn Ready
and keep a heartbeat lease, pods become Running), so no kwok CRDs are needed.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any

from pydantic import Field, field_validator

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.images import mirror_image
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.upstream import kubernetes, kwok
from trainer_infra.manifests import meta
from trainer_infra.nodepools.backend import BackendDefaults
from trainer_infra.nodepools.labels import HOSTNAME, Taint, level_name
from trainer_infra.nodepools.model import NodePool, ResolvedPool

KWOK_VERSION = "v0.8.0"
KWOK_IMAGE = f"{kwok.IMAGE}:{KWOK_VERSION}"
KWOK_NAMESPACE = "kwok-system"
KWOK_NAME = "kwok-controller"
KWOK_ANNOTATION = {kwok.NODE_ANNOTATION: "fake"}
#: The controller manages the nodes carrying KWOK_ANNOTATION (the convention of kwok's docs and kwokctl), no others.
KWOK_MANAGED_NODES = (
    "--manage-all-nodes=false",
    "--manage-nodes-with-annotation-selector=" + ",".join(f"{k}={v}" for k, v in KWOK_ANNOTATION.items()),
)
KWOK_TAINT = Taint(key=kwok.NODE_ANNOTATION, value="fake", effect="NoSchedule")
KWOK_PORT = 10247
# Fake nodes per stack: every one is a Pulumi resource (~2 ms each under mocks, a Node object in the cluster).
# Checked from the layout before a single node is generated.
MAX_KWOK_NODES = 10_000


class KwokPool(StrictModel):
    """Fake nodes laid out over the topology: `layout: [2, 4, 4]` with the default topology is 2 blocks
    × 4 racks per block × 4 nodes per rack."""

    layout: list[Annotated[int, Field(ge=1, le=MAX_KWOK_NODES)]] = Field(
        min_length=1,
        max_length=16,
        description="One fan-out per topology level, coarse → fine; the last one is nodes per domain "
        f"(at most {MAX_KWOK_NODES} fake nodes per stack).",
    )

    @field_validator("layout")
    @classmethod
    def _bounded(cls, layout: list[int]) -> list[int]:
        if math.prod(layout) > MAX_KWOK_NODES:
            raise ValueError(f"makes {math.prod(layout)} fake nodes, more than the limit of {MAX_KWOK_NODES}")
        return layout


def node_slots(pool: ResolvedPool) -> list[tuple[str, dict[str, str]]]:
    """(node name, topology labels) for every slot of the layout, in order."""
    settings: KwokPool = pool.settings
    levels = pool.topology
    out = []
    for path in itertools.product(*(range(n) for n in settings.layout)):
        name = "-".join([pool.name, *(str(i) for i in path)])
        labels: dict[str, str] = {}
        for depth, key in enumerate(levels):
            if key == HOSTNAME:
                labels[key] = name
            else:
                labels[key] = pool.name + "".join(f"-{level_name(levels[j])}{path[j]}" for j in range(depth + 1))
        out.append((name, labels))
    return out


def _longest_generated(pool: str, levels: tuple[str, ...], layout: list[int]) -> str:
    """The longest node name or topology label value the layout generates, without generating them."""
    last = [n - 1 for n in layout]
    name = "-".join([pool, *(str(i) for i in last)])
    values = [name]
    for depth, key in enumerate(levels):
        if key != HOSTNAME:
            values.append(pool + "".join(f"-{level_name(levels[j])}{last[j]}" for j in range(depth + 1)))
    return max(values, key=len)


#: A fake node has no disk; it offers one so that pods requesting ephemeral-storage (every team pod gets a
#: request from its LimitRange, tenancy/ephemeral_storage.py) schedule as on a real node. `nodePools[].disk`
#: replaces it (to try a smaller node's disk against tenancy.ephemeralStorage.max).
FAKE_DISK = "1Ti"


def _resources(pool: ResolvedPool) -> dict[str, str]:
    shape = pool.node
    out = {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": str(shape.pods),
        kubernetes.EPHEMERAL_STORAGE: pool.config.disk or FAKE_DISK,
    }
    if shape.accelerator:
        out[shape.accelerator.resource] = str(shape.accelerator.count)
    return dict(sorted(out.items()))


def kwok_nodes(pool: ResolvedPool) -> list[ManagedObject]:
    resources = _resources(pool)
    base_labels = {
        **pool.node_labels,
        kubernetes.ARCH_LABEL: "amd64",
        kubernetes.OS_LABEL: "linux",
        "type": "kwok",
    }
    objects = []
    for name, topology in node_slots(pool):
        md = meta.metadata(name, labels={**base_labels, **topology}, annotations=KWOK_ANNOTATION)
        objects.append(
            ManagedObject(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": md,
                    "spec": {"taints": [t.as_k8s() for t in pool.taints]},
                    # The API server keeps status on create for Nodes (and ignores it on update); kwok
                    # keeps the conditions fresh. So a new node shape replaces the fake node.
                    "status": {"allocatable": resources, "capacity": resources},
                },
                delete_before_replace=True,
                replace_on_changes=("status",),
            )
        )
    return objects


def kwok_controller(mirror: str | None) -> list[ManagedObject]:
    labels = {kubernetes.APP_NAME: KWOK_NAME}
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get", "list", "patch", "update", "watch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {
            "apiGroups": [kubernetes.COORDINATION_GROUP],
            "resources": ["leases"],
            "verbs": ["create", "get", "list", "patch", "update", "watch"],
        },
    ]
    args = [
        *KWOK_MANAGED_NODES,
        "--manage-nodes-with-label-selector=",
        "--manage-single-node=",
        f"--disregard-status-with-annotation-selector={kwok.STATUS_ANNOTATION}=custom",
        "--disregard-status-with-label-selector=",
        "--node-ip=$(POD_IP)",
        f"--node-port={KWOK_PORT}",
        "--cidr=10.0.0.1/24",
        "--node-lease-duration-seconds=40",
    ]
    probe = {"httpGet": {"path": "/healthz", "port": KWOK_PORT, "scheme": "HTTP"}, "periodSeconds": 20}
    container = {
        "name": KWOK_NAME,
        "image": mirror_image(KWOK_IMAGE, mirror),
        "args": args,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": KWOK_PORT}],
        "readinessProbe": probe,
        "livenessProbe": {**probe, "initialDelaySeconds": 30, "failureThreshold": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta.metadata(KWOK_NAME, KWOK_NAMESPACE, labels=labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"serviceAccountName": KWOK_NAME, "containers": [container]},
            },
        },
    }
    subject = {"kind": "ServiceAccount", "name": KWOK_NAME, "namespace": KWOK_NAMESPACE}
    return [
        ManagedObject(meta.namespace(KWOK_NAMESPACE)),
        ManagedObject(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta.metadata(KWOK_NAME, KWOK_NAMESPACE)}
        ),
        ManagedObject(
            {
                "apiVersion": kubernetes.RBAC_API,
                "kind": "ClusterRole",
                "metadata": meta.metadata(KWOK_NAME, labels=labels),
                "rules": rules,
            }
        ),
        ManagedObject(
            {
                "apiVersion": kubernetes.RBAC_API,
                "kind": "ClusterRoleBinding",
                "metadata": meta.metadata(KWOK_NAME, labels=labels),
                "roleRef": {"apiGroup": kubernetes.RBAC_GROUP, "kind": "ClusterRole", "name": KWOK_NAME},
                "subjects": [subject],
            }
        ),
        ManagedObject(deployment),
    ]


class KwokBackend(BackendDefaults):
    """Simulated nodes laid out over the topology."""

    name = "kwok"
    settings_model = KwokPool
    settings_hint = "e.g. kwok: {layout: [2, 4, 4]}"

    def extra_taints(self) -> tuple[Taint, ...]:
        return (KWOK_TAINT,)

    def default_disk(self, pool: NodePool, settings: Any) -> str | None:
        return FAKE_DISK

    def node_count(self, pool: NodePool, settings: Any) -> int:
        return math.prod(settings.layout) if isinstance(settings, KwokPool) else pool.size.count or 0

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        settings: KwokPool = pool.settings
        at, levels, size = pool.at, pool.topology, pool.config.size
        if len(settings.layout) != len(levels):
            expected = f"expected one count per topology level ({len(levels)}: {', '.join(levels)})"
            return [ConfigIssue(f"{at}.kwok.layout", expected, str(settings.layout))]
        if min(settings.layout) < 1:
            return [ConfigIssue(f"{at}.kwok.layout", "every count must be at least 1", str(settings.layout))]
        issues = []
        if size.count is not None and size.count != pool.node_count:
            issues.append(ConfigIssue(f"{at}.size.count", f"the layout makes {pool.node_count} nodes", str(size.count)))
        longest = _longest_generated(pool.name, levels, settings.layout)
        if len(longest) > 63:
            issues.append(
                ConfigIssue(f"{at}.name", "generated node names/labels exceed 63 characters", longest, "shorten it")
            )
        if size.min is not None or size.max is not None:
            hint = "a kwok pool has exactly the nodes of its layout: drop size.min/max"
            issues.append(ConfigIssue(f"{at}.size", "size.min/max have no effect on a kwok pool", None, hint))
        return issues

    def shared_checks(self, pools: list[ResolvedPool]) -> list[ConfigIssue]:
        """At most MAX_KWOK_NODES in all, and no generated node name in two pools (`a` [1,1,1] and `a-0`
        [1,1] both make `a-0-0-0`)."""
        total = sum(p.node_count for p in pools)
        if total > MAX_KWOK_NODES:
            hint = "shrink kwok.layout: a sandbox rarely needs more than a few hundred fake nodes"
            message = f"kwok pools make {total} fake nodes, more than the limit of {MAX_KWOK_NODES}"
            return [ConfigIssue("nodePools", message, None, hint)]
        issues = []
        owners: dict[str, ResolvedPool] = {}
        for pool in pools:
            if len(pool.settings.layout) != len(pool.topology):
                continue  # reported by checks()
            for name, _ in node_slots(pool):
                other = owners.setdefault(name, pool)
                if other is not pool:
                    hint = "rename one pool: node names are <pool>-<index per level>"
                    issues.append(
                        ConfigIssue(
                            f"{pool.at}.name",
                            f"generated node {name} is also a node of pool {other.name} ({other.at})",
                            pool.name,
                            hint,
                        )
                    )
                    break
        return issues

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        return kwok_nodes(pool)

    def shared_objects(self, pools: list[ResolvedPool], mirror: str | None) -> list[ManagedObject]:
        return kwok_controller(mirror) if pools else []


BACKEND = KwokBackend()
