"""Cross-field checks of node pools, teams and placement, each with the exact config path.

Run from StackConfig's model validator, so `validate`, `render` and `pulumi up` refuse the same configs.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import TYPE_CHECKING

from trainer_infra.errors import ConfigIssue, did_you_mean
from trainer_infra.nodepools.karpenter import PROVIDED_LEVELS
from trainer_infra.nodepools.kwok import node_slots
from trainer_infra.nodepools.labels import HOSTNAME, format_quantity, level_name
from trainer_infra.queues.capacity import pool_totals
from trainer_infra.queues.placement import resolve_level

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig
    from trainer_infra.nodepools.pool import NodePoolConfig

MAX_FLAVORS = 64  # flavors per ClusterQueue resource group
MAX_FLAVOR_FIELDS = 8  # nodeLabels / tolerations per ResourceFlavor
MAX_LEVELS = 16
# NodePool template label domains Karpenter's CRD rejects (karpenter.sh_nodepools.yaml CEL rules).
KARPENTER_RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")


def check(cfg: StackConfig) -> list[ConfigIssue]:
    issues = _pools(cfg)
    if not issues:  # quotas and placement are only meaningful over well-formed pools
        issues += _teams(cfg) + _placement(cfg)
    return issues


def _topology(at: str, pool: NodePoolConfig) -> list[ConfigIssue]:
    levels = pool.resolved_topology
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


def _backend(at: str, pool: NodePoolConfig) -> list[ConfigIssue]:
    issues = []
    for other in ("kwok", "static", "karpenter"):
        if other != pool.backend and getattr(pool, other) is not None:
            issues.append(ConfigIssue(f"{at}.{other}", f"settings for backend {other} on a {pool.backend} pool"))
    if getattr(pool, pool.backend) is None:
        hint = {"kwok": "e.g. kwok: {layout: [2, 4, 4]}", "static": "static: {nodes: [...]} or {nodeSelector: {...}}"}
        hint["karpenter"] = "karpenter: {instanceTypes: [...], nodeClass: {...}}"
        issues.append(ConfigIssue(f"{at}.{pool.backend}", "required key is missing", None, hint[pool.backend]))
        return issues
    levels = pool.resolved_topology
    size = pool.size
    if pool.backend == "kwok" and pool.kwok is not None:
        if len(pool.kwok.layout) != len(levels):
            issues.append(
                ConfigIssue(
                    f"{at}.kwok.layout",
                    f"expected one count per topology level ({len(levels)}: {', '.join(levels)})",
                    str(pool.kwok.layout),
                )
            )
        elif min(pool.kwok.layout) < 1:
            issues.append(ConfigIssue(f"{at}.kwok.layout", "every count must be at least 1", str(pool.kwok.layout)))
        else:
            if size.count is not None and size.count != pool.node_count:
                issues.append(
                    ConfigIssue(f"{at}.size.count", f"the layout makes {pool.node_count} nodes", str(size.count))
                )
            longest = max((v for _, labels in node_slots(pool) for v in labels.values()), key=len)
            if len(longest) > 63:
                issues.append(
                    ConfigIssue(f"{at}.name", "generated node names/labels exceed 63 characters", longest, "shorten it")
                )
    if pool.backend == "static" and pool.static is not None:
        st = pool.static
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
        if st.node_selector and size.count is None:
            issues.append(ConfigIssue(f"{at}.size.count", "required for nodeSelector pools (quota arithmetic)"))
    if pool.backend == "karpenter" and pool.karpenter is not None:
        kp = pool.karpenter
        unknown = [k for k in levels if k not in PROVIDED_LEVELS]
        if unknown:
            issues.append(
                ConfigIssue(
                    f"{at}.topology",
                    "Karpenter nodes do not carry these labels",
                    ", ".join(unknown),
                    "use " + ", ".join(sorted(PROVIDED_LEVELS)),
                )
            )
        for key in pool.labels:
            domain = key.split("/")[0] if "/" in key else ""
            if domain.endswith(KARPENTER_RESTRICTED_DOMAINS):
                issues.append(
                    ConfigIssue(f"{at}.labels.{key}", "Karpenter refuses NodePool labels in this domain", domain)
                )
        if size.max is None:
            issues.append(ConfigIssue(f"{at}.size.max", "required for karpenter pools (becomes the NodePool limits)"))
        if size.min or size.count is not None:
            issues.append(ConfigIssue(f"{at}.size", "karpenter pools scale from zero: set only max"))
        if (kp.node_class is None) == (kp.node_class_name is None):
            issues.append(ConfigIssue(f"{at}.karpenter", "set exactly one of nodeClass, nodeClassName"))
    return issues


def _pools(cfg: StackConfig) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    pools = cfg.node_pools
    if len(pools) > MAX_FLAVORS:
        issues.append(
            ConfigIssue("nodePools", f"Kueue allows at most {MAX_FLAVORS} flavors per queue", str(len(pools)))
        )
    seen: dict[str, int] = {}
    for i, pool in enumerate(pools):
        at = f"nodePools[{i}]"
        if pool.name in seen:
            issues.append(
                ConfigIssue(f"{at}.name", f"duplicate pool name (also nodePools[{seen[pool.name]}])", pool.name)
            )
        seen.setdefault(pool.name, i)
        if pool.node.accelerator and not pool.configured_taints:
            issues.append(
                ConfigIssue(
                    f"{at}.taints",
                    "a GPU pool needs a taint, or CPU-only pods will fill its nodes",
                    "[]",
                    "drop `taints: []` to get nvidia.com/gpu=present:NoSchedule",
                )
            )
        if len(pool.resolved_taints) > MAX_FLAVOR_FIELDS or len(pool.flavor_labels) > MAX_FLAVOR_FIELDS:
            issues.append(ConfigIssue(at, f"a ResourceFlavor takes at most {MAX_FLAVOR_FIELDS} labels and tolerations"))
        issues += _topology(f"{at}.topology", pool) + _backend(at, pool)
    # Two flavors tell their pools apart only if each one's nodeLabels fail to match the other's nodes.
    for i, a in enumerate(pools):
        for j, b in enumerate(pools[:i]):
            if a.name == b.name:
                continue
            for x, y, k in ((a, b, i), (b, a, j)):
                if x.flavor_labels.items() <= y.node_labels().items():
                    issues.append(
                        ConfigIssue(
                            f"nodePools[{k}]",
                            f"its flavor selects the nodes of pool {y.name} too",
                            str(x.flavor_labels),
                            "give the pools distinct nodeSelector labels",
                        )
                    )
                    break
    owners: dict[str, str] = {}
    for i, pool in enumerate(pools):
        for j, node in enumerate(pool.static.nodes if pool.static else []):
            if node.name in owners and owners[node.name] != pool.name:
                issues.append(
                    ConfigIssue(
                        f"nodePools[{i}].static.nodes[{j}]", f"node is already in pool {owners[node.name]}", node.name
                    )
                )
            owners.setdefault(node.name, pool.name)
    return issues


def _teams(cfg: StackConfig) -> list[ConfigIssue]:
    issues = []
    pools = {p.name: p for p in cfg.node_pools}
    names = Counter(t.name for t in cfg.teams)
    queues = Counter((t.resolved_namespace, t.local_queue) for t in cfg.teams)
    for i, team in enumerate(cfg.teams):
        at = f"teams[{i}]"
        if names[team.name] > 1:
            issues.append(ConfigIssue(f"{at}.name", "duplicate team name (one ClusterQueue per team)", team.name))
        if queues[(team.resolved_namespace, team.local_queue)] > 1:
            issues.append(
                ConfigIssue(f"{at}.localQueue", "another team has a LocalQueue of this name in the same namespace")
            )
        for pool_name, quota in team.quota.items():
            qat = f"{at}.quota.{pool_name}"
            pool = pools.get(pool_name)
            if pool is None:
                hint = did_you_mean(pool_name, pools) or (
                    "pools: " + ", ".join(pools) if pools else "declare nodePools"
                )
                issues.append(ConfigIssue(qat, "no node pool of this name", pool_name, hint))
                continue
            if quota.gpus and pool.node.accelerator is None:
                issues.append(ConfigIssue(f"{qat}.gpus", "pool has no accelerator", str(quota.gpus)))
            if pool.node.accelerator is None and quota.cpu is None and quota.memory is None:
                issues.append(ConfigIssue(qat, "a pool without accelerators needs cpu and/or memory quota"))
            if quota.lending_limit is not None:
                from trainer_infra.queues.derive import limit_for, nominal

                amounts = nominal(quota, pool)
                for res, amount in amounts.items():
                    lend = limit_for(quota.lending_limit, res, pool.accelerator_resource)
                    if lend is not None and lend > amount:
                        field = "gpus" if res == pool.accelerator_resource else res
                        issues.append(
                            ConfigIssue(
                                f"{qat}.lendingLimit.{field}",
                                f"lendingLimit must not exceed the nominal quota ({format_quantity(amount)})",
                                format_quantity(lend),
                            )
                        )
    if not cfg.queues.cohort.oversubscribe and not issues:
        for t in pool_totals(cfg):
            over = t.over()
            pool = cfg.node_pools[t.index]
            if pool.accelerator_resource in over:  # derived cpu/memory follow the GPUs: one message is enough
                explicit = {
                    r for team in cfg.teams for r in ("cpu", "memory") if getattr(team.quota.get(pool.name), r, None)
                }
                over = [r for r in over if r == pool.accelerator_resource or r in explicit]
            for res in over:
                binary = res == "memory"
                teams = ", ".join(f"{n}={format_quantity(q[res], binary)}" for n, q in t.by_team.items() if q[res])
                issues.append(
                    ConfigIssue(
                        f"nodePools[{t.index}]",
                        f"team quotas for {res} add up to {format_quantity(t.quota[res], binary)}, more than the "
                        f"pool's capacity {format_quantity(t.capacity.get(res, Decimal(0)), binary)}",
                        teams,
                        "lower teams[].quota, grow the pool, or set queues.cohort.oversubscribe: true",
                    )
                )
    dup = sorted(n for n, c in Counter(p.name for p in cfg.queues.priority_classes).items() if c > 1)
    if dup:
        issues.append(ConfigIssue("queues.priorityClasses", "duplicate names", ", ".join(dup)))
    return issues


def _placement(cfg: StackConfig) -> list[ConfigIssue]:
    issues = []
    topologies = sorted({p.resolved_topology for p in cfg.node_pools})
    known = sorted({level_name(k) for levels in topologies for k in levels})
    policies = [("queues.placement.default", cfg.queues.placement.default)] + [
        (f"queues.placement.runtimes.{name}", p) for name, p in cfg.queues.placement.runtimes.items()
    ]
    for at, policy in policies:
        for mode in ("required", "preferred"):
            level = getattr(policy, mode)
            if level is None:
                continue
            if not topologies:
                issues.append(ConfigIssue(f"{at}.{mode}", "no node pool, so no topology level to place on", level))
            elif resolve_level(level, topologies) is None:
                hint = did_you_mean(level, known) or "levels present in every pool topology: " + ", ".join(
                    sorted({level_name(k) for k in set.intersection(*(set(t) for t in topologies))})
                )
                issues.append(ConfigIssue(f"{at}.{mode}", "not a level of every pool topology", level, hint))
    return issues
