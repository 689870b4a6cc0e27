"""Checks of `nodePools[]`: each pool alone (topology, taints, its backend's own rules), then pools against
each other (names, flavors that would select each other's nodes, the backends' cross-pool rules)."""

from __future__ import annotations

from collections import Counter

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.quantity import quantity
from trainer_infra.nodepools import pids
from trainer_infra.nodepools.disk import LARGEST_GIB, node_disk
from trainer_infra.nodepools.labels import (
    CAPACITY_TYPE_LABEL,
    HOSTNAME,
    NODE_OWN_LABELS,
    POOL_LABEL,
    accelerator_taint,
    level_name,
)
from trainer_infra.nodepools.model import ResolvedPool
from trainer_infra.nodepools.registry import BACKENDS

MAX_FLAVORS = 64  # flavors per ClusterQueue resource group
MAX_FLAVOR_FIELDS = 8  # nodeLabels / tolerations per ResourceFlavor
MAX_LEVELS = 16


def _topology(pool: ResolvedPool) -> list[ConfigIssue]:
    at = f"{pool.at}.topology"
    levels = pool.topology
    found = ", ".join(levels)
    issues = []
    if not levels or levels[-1] != HOSTNAME:
        issues.append(ConfigIssue(at, f"topology must end with {HOSTNAME}", found, "order levels coarse → fine"))
    repeated = sorted(k for k, n in Counter(levels).items() if n > 1)
    if repeated:
        issues.append(ConfigIssue(at, "topology repeats a level", ", ".join(repeated), "list each label key once"))
    names = sorted(n for n, c in Counter(level_name(k) for k in levels).items() if c > 1)
    if names and not repeated:
        issues.append(
            ConfigIssue(
                at, "two levels share a short name, so placement policies cannot tell them apart", ", ".join(names)
            )
        )
    if len(levels) > MAX_LEVELS:
        issues.append(ConfigIssue(at, f"Kueue allows at most {MAX_LEVELS} topology levels", str(len(levels))))
    return issues


def _backend(pool: ResolvedPool) -> list[ConfigIssue]:
    """Exactly the settings block of the pool's backend, the levels its nodes carry, then its own rules."""
    at, name = pool.at, pool.config.backend
    backend = BACKENDS[name]
    issues = [
        ConfigIssue(f"{at}.{other.name}", f"settings for backend {other.name} on a {name} pool")
        for other in BACKENDS
        if other.name != name and getattr(pool.config, other.name, None) is not None
    ]
    if pool.settings is None:
        issues.append(ConfigIssue(f"{at}.{name}", "required key is missing", None, backend.settings_hint))
        return issues
    provided = backend.provided_levels(pool.config, pool.settings)
    unknown = [k for k in pool.topology if provided is not None and k not in provided]
    if unknown:
        issues.append(
            ConfigIssue(
                f"{at}.topology",
                f"{name.capitalize()} nodes do not carry these labels",
                ", ".join(unknown),
                "use " + ", ".join(sorted(provided or ())),
            )
        )
    return issues + backend.checks(pool)


def check_pools(pools: tuple[ResolvedPool, ...], cloud: StrictModel | None = None) -> list[ConfigIssue]:
    """`cloud` is the stack's `cloud:` block: a cloud backend's pools need its cluster there."""
    issues: list[ConfigIssue] = []
    for name in sorted({p.config.backend for p in pools}):
        backend = BACKENDS[name]
        if backend.cluster_model is not None and getattr(cloud, name, None) is None:
            first = next(p for p in pools if p.config.backend == name)
            issues.append(
                ConfigIssue(
                    f"cloud.{name}",
                    f"required by {first.at} (backend {name}): the cluster its node pools join",
                    None,
                    f"see docs/node-pools-and-queues.md, e.g. stacks/Pulumi.{name}.yaml",
                )
            )
    if len(pools) > MAX_FLAVORS:
        issues.append(
            ConfigIssue("nodePools", f"Kueue allows at most {MAX_FLAVORS} flavors per queue", str(len(pools)))
        )
    seen: dict[str, int] = {}
    for pool in pools:
        if pool.name in seen:
            issues.append(
                ConfigIssue(f"{pool.at}.name", f"duplicate pool name (also nodePools[{seen[pool.name]}])", pool.name)
            )
        seen.setdefault(pool.name, pool.index)
        if pool.node.accelerator and not pool.config.configured_taints(pool.node):
            taint = accelerator_taint(pool.node.accelerator.resource)
            issues.append(
                ConfigIssue(
                    f"{pool.at}.taints",
                    "a GPU pool needs a taint, or CPU-only pods will fill its nodes",
                    "[]",
                    f"drop `taints: []` to get {taint.key}={taint.value}:{taint.effect}",
                )
            )
        if len(pool.taints) > MAX_FLAVOR_FIELDS or len(pool.flavor_labels) > MAX_FLAVOR_FIELDS:
            issues.append(
                ConfigIssue(pool.at, f"a ResourceFlavor takes at most {MAX_FLAVOR_FIELDS} labels and tolerations")
            )
        issues += _topology(pool) + _backend(pool) + _shape(pool) + _taints(pool) + _labels(pool)
    issues += _flavors_overlap(pools)
    for backend in BACKENDS:
        issues += backend.shared_checks([p for p in pools if p.config.backend == backend.name and p.settings])
    return issues


def _shape(pool: ResolvedPool) -> list[ConfigIssue]:
    """A declared `node` next to the backend's own shape may only promise less CPU and memory (room for DaemonSets):
    more than the machine offers, or another accelerator, contradicts the machine table."""
    declared = pool.config.node
    facts = BACKENDS[pool.config.backend].shape(pool.config, pool.settings) if pool.settings is not None else None
    if declared is None or facts is None:
        return []
    at, hint = f"{pool.at}.node", "drop `node` (the machine type gives it) or stay within the machine's figures"
    issues = [
        ConfigIssue(
            f"{at}.{res}",
            f"more than a node of this machine type offers to pods ({getattr(facts, res)}, nodepools/machine_types)",
            str(getattr(declared, res)),
            hint,
        )
        for res in ("cpu", "memory")
        if quantity(str(getattr(declared, res))) > quantity(str(getattr(facts, res)))
    ]
    if declared.pods > facts.pods:
        issues.append(
            ConfigIssue(f"{at}.pods", f"the machine's pools take at most {facts.pods} pods", str(declared.pods))
        )
    mine, theirs = declared.accelerator, facts.accelerator
    for field in ("resource", "count", "product"):
        got = getattr(mine, field) if mine else None
        want = getattr(theirs, field) if theirs else None
        if got != want and not (field == "product" and got is None):
            issues.append(ConfigIssue(f"{at}.accelerator.{field}", f"the machine type has {want}", str(got), hint))
    return issues


def _taints(pool: ResolvedPool) -> list[ConfigIssue]:
    """The API server keeps one taint per key and effect (Node validation): a second one is refused."""
    issues = []
    seen: dict[tuple[str, str], str] = {}
    configured = len(pool.config.configured_taints(pool.node))
    for i, taint in enumerate(pool.taints):
        backends = i >= configured  # added by the backend itself (kwok's)
        where = f"{pool.at}.taints" if backends or pool.config.taints is None else f"{pool.at}.taints[{i}]"
        key = (taint.key, taint.effect)
        if key not in seen:
            seen[key] = where
            continue
        whose = f" (the {pool.config.backend} backend puts one on every node)" if backends else ""
        issues.append(
            ConfigIssue(
                where,
                f"a second taint with key {taint.key} and effect {taint.effect}{whose}",
                f"{taint.key}={taint.value}:{taint.effect}",
                f"a node holds one taint per key and effect; the other one is at {seen[key]}",
            )
        )
    return issues


def _labels(pool: ResolvedPool) -> list[ConfigIssue]:
    """`labels` may not set what the platform sets on the pool's nodes: the value would be replaced."""
    owned = {POOL_LABEL: "the pool", CAPACITY_TYPE_LABEL: "capacityType"}
    owned |= {key: "topology" for key in pool.topology}
    owned |= {key: "the node itself" for key in NODE_OWN_LABELS}
    acc = pool.node.accelerator
    if acc and acc.product and acc.product_label_key:
        owned[acc.product_label_key] = "node.accelerator.product"
    owned |= {
        key: f"the {pool.config.backend} backend's selector"
        for key in BACKENDS[pool.config.backend].selector(pool.settings)
    }
    return [
        ConfigIssue(f"{pool.at}.labels.{key}", f"set by the platform from {owned[key]}", key, "remove it from labels")
        for key in pool.config.labels
        if key in owned
    ]


def _flavors_overlap(pools: tuple[ResolvedPool, ...]) -> list[ConfigIssue]:
    """Two flavors tell their pools apart only if each one's nodeLabels fail to match the other's nodes."""
    issues = []
    for i, a in enumerate(pools):
        for b in pools[:i]:
            if a.name == b.name:
                continue
            for x, y in ((a, b), (b, a)):
                if x.flavor_labels.items() <= y.node_labels.items():
                    issues.append(
                        ConfigIssue(
                            x.at,
                            f"its flavor selects the nodes of pool {y.name} too",
                            str(x.flavor_labels),
                            "give the pools distinct nodeSelector labels",
                        )
                    )
                    break
    return issues


def check_scaling_under_tas(pools: tuple[ResolvedPool, ...], tas: bool) -> list[ConfigIssue]:
    """With Topology-Aware Scheduling, Kueue places a job onto the nodes that exist (its TAS cache is built from
    Node objects); only a flavor guarded by a ProvisioningRequest check gets its topology after the nodes are
    provisioned (Kueue 0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go `podSetTopologyRequest`). A pool
    that autoscales above its minimum without one would count quota no job can ever be admitted into: the TAS
    snapshot of its flavor holds only the Node objects its nodeLabels select (pkg/cache/scheduler/tas_flavor.go
    `snapshot`), so with none yet a job "doesn't fit" (tas_flavor_snapshot.go), and Kueue never creates the pods
    the autoscaler (cluster autoscaler, Karpenter: both scale for pending pods) would react to. Karpenter pools
    scale from zero and Karpenter answers no ProvisioningRequest, so under TAS every Karpenter pool is refused."""
    if not tas:
        return []
    return [
        ConfigIssue(
            f"{p.at}.size",
            f"autoscales {p.autoscaling[0]}..{p.autoscaling[1]} nodes, but Kueue's topology-aware scheduling "
            "admits only onto nodes that exist, so jobs needing the nodes above size.min would wait forever",
            f"min {p.autoscaling[0]}, max {p.autoscaling[1]}",
            BACKENDS[p.config.backend].scaling_hint,
        )
        for p in pools
        if p.autoscaling is not None and p.autoscaling[0] < p.autoscaling[1] and p.provisioning is None
    ]


def kubelet_warnings(pools: tuple[ResolvedPool, ...]) -> list[str]:
    """What to set on the nodes whose kubelet the platform does not configure (kwok's nodes are fake: none)."""
    return [
        pids.unmanaged_warning(p.at, p.config.pod_pids_limit)
        for p in pools
        if p.settings is not None and BACKENDS[p.config.backend].kubelet_unmanaged(p)
    ]


def disk_issues(pools: tuple[ResolvedPool, ...], container_max: str | None) -> list[ConfigIssue]:
    """A disk the platform renders must hold a container at the bound (``container_max``): below that minimum a
    job is admitted and never gets a node, which the stack itself would have made; nor may it exceed the cloud's
    largest volume. Refused rather than warned: both values are in this stack, and the fix is in it too."""
    issues = []
    for p in pools:
        disk = p.disk
        if disk is None:
            continue
        at = f"{p.at}.disk"
        found = p.config.disk or f"{disk.quantity}, derived from tenancy.ephemeralStorage.max"
        if container_max is not None and disk.size_gib < disk.minimum_gib:
            issues.append(
                ConfigIssue(
                    at,
                    f"at least {disk.minimum_gib}Gi: the least disk on which a {disk.rule} node offers pods the "
                    f"{container_max} a container may ask for (tenancy.ephemeralStorage.max); on less, such a job "
                    "is admitted and never gets a node",
                    found,
                    f"drop disk (the default is {node_disk(disk.rule, container_max, None).quantity}), or lower "
                    "tenancy.ephemeralStorage.max",
                )
            )
        largest = LARGEST_GIB[disk.rule]
        if disk.size_gib > largest:
            issues.append(
                ConfigIssue(
                    at,
                    f"at most {largest}Gi: the largest volume a {disk.rule} node can have",
                    found,
                    "lower tenancy.ephemeralStorage.max (the disk is sized for it) or disk",
                )
            )
    return issues


def disk_warnings(pools: tuple[ResolvedPool, ...], container_max: str | None) -> list[str]:
    """Pools whose disk the platform does not render and whose nodes offer, as declared (`disk`) or by their
    backend's default, less than a member's container may ask for (``container_max``): Kueue does not count node
    disk, so such a pod is admitted and then never gets a node. The platform cannot resize these nodes: a warning."""
    out = []
    for p in pools:
        if container_max is None or p.disk is not None or p.settings is None:
            continue
        default = BACKENDS[p.config.backend].default_disk(p.config, p.settings)
        offered = p.config.disk or default
        if offered is None or quantity(offered) >= quantity(container_max):
            continue
        whose = "as declared in disk" if p.config.disk else f"{p.config.backend}'s default"
        out.append(
            f"{p.at}: its nodes offer pods {offered} of disk ({whose}), but tenancy.ephemeralStorage.max lets a "
            f"container ask for up to {container_max}: a job asking for more than the node has is admitted and never "
            "gets a node. Lower tenancy.ephemeralStorage.max, or give the pool nodes with a larger disk (then "
            "declare it in disk)"
        )
    return out
