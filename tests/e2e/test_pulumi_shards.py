"""Moving a deployed single stack's teams into team stacks (docs/large-organisations.md, "Migrating a live stack")
through the real CLI, engine and provider: after the documented `pulumi state move` commands, the platform stack
previews no change, its `up` records the team stacks' count, every team stack then previews no change, and their
`up` leaves every team object where it was (same UID).

Opt-in with ``make bench-pulumi`` (same toolchain and control plane as ``test_pulumi.py``): a synthetic stack of
``SHARDS_TEAMS`` teams (default 6) into 2 team stacks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.bench import synthetic
from tests.e2e.pulumi_steps import record_timing
from trainer_infra.sandbox.pulumi_stack import STACK, Installation, installation
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.shards import layout, moves
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.e2e

TEAMS = int(os.environ.get("SHARDS_TEAMS", "6"))
SHARDS = 2
#: what a preview of a migrated stack may show: nothing changes (the team stack reads its platform's outputs)
UNCHANGED = {"same", "read"}


def _stack_file(raw: dict[str, Any]) -> dict[str, Any]:
    return {"config": {f"trainer-platform:{key}": value for key, value in raw.items()}}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Installation, dict[str, Any]]]:
    raw = synthetic(TEAMS, 1)
    with installation(tmp_path_factory.mktemp("pulumi-shards"), _stack_file(raw)) as installed:
        installed.project.up()
        yield installed, raw


def _changes(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["op"], s["urn"]) for s in doc.get("steps", []) if s["op"] not in UNCHANGED]


def test_the_documented_moves_take_every_team_into_its_stack_with_nothing_replaced(
    deployed: tuple[Installation, dict[str, Any]],
) -> None:
    installed, raw = deployed
    project = installed.project
    client = installed.sandbox.client
    uids = {n["metadata"]["name"]: n["metadata"]["uid"] for n in client.list("v1", "Namespace")}
    sharded = {**raw, "teamShards": SHARDS}
    validated = validate(sharded)
    project.write_stack(installed.config(_stack_file(sharded)))
    stacks = layout(STACK, SHARDS, validated.config.teams).stacks()[1:]
    for name in stacks:
        project.run("stack", "init", name, "--no-select", "--secrets-provider", "passphrase")
    planned = moves(build_plan(validated), validated.config.teams, STACK, "trainer-platform", 0, SHARDS)
    assert planned and {m.dest for m in planned} <= set(stacks)
    for move in planned:
        moved = project.run("state", "move", "--source", move.source, "--dest", move.dest, "--yes", *move.urns)
        record_timing(f"state move ({len(move.urns)} resources to {move.dest})", moved)

    platform = project.preview("--json")
    assert not _changes(json.loads(platform.stdout)), _changes(json.loads(platform.stdout))
    project.up()  # changes no object; records the output `teamShards` the team stacks check
    config = str(project.workdir / f"Pulumi.{STACK}.yaml")
    for name in stacks:
        preview = project.run("preview", "--json", "--stack", name, "--config-file", config)
        assert not _changes(json.loads(preview.stdout)), (name, _changes(json.loads(preview.stdout)))
        project.run("up", "--yes", "--skip-preview", "--stack", name, "--config-file", config)
    after = {n["metadata"]["name"]: n["metadata"]["uid"] for n in client.list("v1", "Namespace")}
    teams = [t.name for t in validated.config.teams]
    assert {t: after.get(t) for t in teams} == {t: uids[t] for t in teams}  # the same namespaces, never recreated
