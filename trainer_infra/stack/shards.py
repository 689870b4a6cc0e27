"""Team shards: a large platform as one platform stack plus `teamShards` small stacks of teams.

A DIY (file, S3) backend rewrites the whole state after every step (pulumi#10960), so the first `up` of one stack
costs O(resources²); split into K stacks it costs K × (n/K)². The platform stack (`prod`) keeps what every team
shares (charts, gates, CRDs, cohort, flavors, runtimes, admission policies, alerts); stack `prod.teams-NN` holds the
objects of the teams hashed to shard NN: an object is a team's when it lives in the team's namespace or carries the
team label (its Namespace, ClusterQueue, cluster-wide RBAC). Every stack runs the same program on the same
config file (`--config-file stacks/Pulumi.prod.yaml`), builds the same whole plan and keeps its part, so the
shards and the platform cannot disagree about a team. A team's shard depends only on its name (a hash), never on
the other teams: adding or removing a team moves no other team between stacks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.objects import ManagedObject, Plan
from trainer_infra.diff.compare import Render
from trainer_infra.manifests.meta import TEAM_LABEL
from trainer_infra.platform.component import TYPE as COMPONENT
from trainer_infra.platform.objects import type_token
from trainer_infra.teams.model import TeamConfig

#: `<platform stack>.teams-<NN>`: Pulumi stack names allow dots, so the platform's name stays a plain prefix.
SEPARATOR = ".teams-"
_SHARD_STACK = re.compile(r"^(?P<platform>.+)\.teams-(?P<index>[0-9]+)$")


def shard_of(team: str, count: int) -> int:
    """The team's shard: a hash of its name alone (not of its position), so teams never move between stacks."""
    return int.from_bytes(hashlib.sha256(team.encode()).digest()[:8], "big") % count


def shard_stack(platform: str, index: int, count: int) -> str:
    return f"{platform}{SEPARATOR}{index:0{max(2, len(str(count - 1)))}d}"


def parse_shard_stack(stack: str) -> tuple[str, int] | None:
    """`prod.teams-03` → (`prod`, 3); None for any other stack name."""
    m = _SHARD_STACK.match(stack)
    return (m["platform"], int(m["index"])) if m else None


@dataclass(frozen=True)
class Layout:
    """Which team lives in which stack, in deploy order (platform first)."""

    platform: str
    count: int
    teams: tuple[tuple[str, ...], ...]  # teams[i]: the team names of shard i, in config order

    def stacks(self) -> list[str]:
        return [self.platform, *(shard_stack(self.platform, i, self.count) for i in range(self.count))]


def layout(platform: str, count: int, teams: Sequence[TeamConfig]) -> Layout:
    by_shard: list[list[str]] = [[] for _ in range(count)]
    for team in teams:
        by_shard[shard_of(team.name, count)].append(team.name)
    return Layout(platform, count, tuple(tuple(t) for t in by_shard))


def owner(obj: ManagedObject, namespaces: Mapping[str, str]) -> str | None:
    """The team an object belongs to (`namespaces`: team namespace → team), or None for a platform object."""
    md = obj.manifest["metadata"]
    if md.get("namespace") in namespaces:
        return namespaces[md["namespace"]]
    label = md.get("labels", {}).get(TEAM_LABEL)
    return str(label) if label is not None else None


def _within(objects: list[ManagedObject], keep: Callable[[str], bool]) -> tuple[ManagedObject, ...]:
    """Ordering inside one stack only: the platform stack runs before every shard, so what a shard object waited
    for in the platform is there; a platform object waiting for team objects (the admission policies read the
    namespaces' allow-lists) is applied before them, and a team's namespace comes with its allow-list."""
    return tuple(replace(o, after=tuple(a for a in o.after if keep(a))) if o.after else o for o in objects)


def split(plan: Plan, teams: Sequence[TeamConfig], count: int) -> tuple[Plan, tuple[Plan, ...]]:
    """The platform stack's plan and each shard's plan; together they hold exactly the plan's objects."""
    namespaces = {t.resolved_namespace: t.name for t in teams}
    shard = {t.name: shard_of(t.name, count) for t in teams}
    parts: list[list[ManagedObject]] = [[] for _ in range(count + 1)]  # 0: the platform, i + 1: shard i
    for obj in plan.objects:
        team = owner(obj, namespaces)
        parts[0 if team is None or team not in shard else shard[team] + 1].append(obj)
    team_keys = {o.key for part in parts[1:] for o in part}
    platform = replace(plan, objects=_within(parts[0], lambda a: a not in team_keys))
    shards = []
    for part in parts[1:]:
        keys = {o.key for o in part}
        shards.append(replace(plan, releases=(), gates=(), resources=(), objects=_within(part, keys.__contains__)))
    return platform, tuple(shards)


def select(plan: Plan, teams: Sequence[TeamConfig], count: int, stack: str) -> Plan:
    """The part of the plan `stack` deploys: the platform stack's, or shard NN's (`<platform>.teams-NN`)."""
    platform, shards = split(plan, teams, count)
    parsed = parse_shard_stack(stack)
    if parsed is None:
        return platform
    name, index = parsed
    if index >= count:
        first, last = shard_stack(name, 0, count), shard_stack(name, count - 1, count)
        hint = f"teamShards is {count}: the team stacks are {first} to {last}"
        raise ConfigError([ConfigIssue("teamShards", f"no shard {index} for stack {stack}", str(count), hint)], stack)
    return shards[index]


def check_stack(stack: str, count: int, source: str) -> None:
    """A shard stack needs its platform's config (`--config-file`) with teamShards set."""
    parsed = parse_shard_stack(stack)
    if parsed is not None and count == 0:
        platform = parsed[0]
        hint = (
            f"a team shard runs on its platform's config: pulumi up --stack {stack} "
            f"--config-file stacks/Pulumi.{platform}.yaml, with teamShards set there (docs/large-organisations.md)"
        )
        raise ConfigError([ConfigIssue("teamShards", f"stack {stack} is a team shard", None, hint)], source)


@dataclass(frozen=True)
class Move:
    """One `pulumi state move` of a migration: these resources from stack `source` to stack `dest`."""

    source: str
    dest: str
    urns: tuple[str, ...]

    def command(self) -> str:
        urns = " ".join(f"'{u}'" for u in self.urns)
        return f"pulumi state move --source {self.source} --dest {self.dest} --yes {urns}"


def _stack_of(platform: str, team: str, count: int) -> str:
    return platform if count == 0 else shard_stack(platform, shard_of(team, count), count)


def moves(plan: Plan, teams: Sequence[TeamConfig], platform: str, project: str, before: int, after: int) -> list[Move]:
    """What moves the objects of every team whose stack changes from `before` shards (0: the one stack) to
    `after` shards, keeping each object's URN apart from its stack (see platform/shard.py): no object is
    replaced or deleted, the next `up` of each stack shows no change."""
    namespaces = {t.resolved_namespace: t.name for t in teams}
    grouped: dict[tuple[str, str], list[str]] = {}
    for obj in plan.objects:
        team = owner(obj, namespaces)
        if team is None or team not in {t.name for t in teams}:
            continue
        source, dest = _stack_of(platform, team, before), _stack_of(platform, team, after)
        if source == dest:
            continue
        token = type_token(obj.manifest["apiVersion"], obj.manifest["kind"] + ("Patch" if obj.patch else ""))
        parent = f"{COMPONENT}$" if source == platform else ""
        grouped.setdefault((source, dest), []).append(f"urn:pulumi:{source}::{project}::{parent}{token}::{obj.key}")
    return [Move(s, d, tuple(urns)) for (s, d), urns in sorted(grouped.items())]


def _stacks_of(render: Render, platform: str, count: int) -> dict[str, list[Any]]:
    """Each stack's share of a render (objects and their Pulumi options, dependencies kept inside the stack)."""
    teams_of_ns = {
        m["metadata"]["name"]: labels[TEAM_LABEL]
        for m in render.manifests
        if m["kind"] == "Namespace" and TEAM_LABEL in (labels := m["metadata"].get("labels", {}))
    }

    def stack(m: dict[str, Any] | None) -> str:
        if m is None:
            return platform
        md = m["metadata"]
        team = teams_of_ns.get(md.get("namespace", "")) or md.get("labels", {}).get(TEAM_LABEL)
        return platform if team is None or not count else shard_stack(platform, shard_of(str(team), count), count)

    by_key = {ManagedObject(m).key: m for m in render.manifests}
    where = {key: stack(m) for key, m in by_key.items()}
    out: dict[str, list[Any]] = {platform: [sorted(render.releases, key=lambda r: str(r.get("name")))]}
    for m in render.manifests:
        out.setdefault(stack(m), []).append(m)
    for r in render.resources:
        home = stack(by_key.get(str(r["name"])))
        inside = [d for d in r.get("dependsOn", []) if where.get(d, platform) == home]
        out.setdefault(home, []).append({**r, "dependsOn": inside})
    return out


def affected(base: Render, head: Render, platform: str, count: int, before: int) -> list[str]:
    """The stacks whose part differs between two renders of the whole plan (`before`: the base's teamShards, -1 for
    a new stack), in deploy order: what a pull request has to preview. A one-team change is that team's stack
    alone; a change of the count, every stack."""
    if not count:
        return [platform]  # one stack: always previewed, as before team stacks
    stacks = layout(platform, count, ()).stacks()
    if before != count:
        return stacks
    old, new = _stacks_of(base, platform, count), _stacks_of(head, platform, count)
    return [s for s in stacks if old.get(s) != new.get(s)]
