"""Team shards (`teamShards`, docs/large-organisations.md): a team's stack never moves when teams are added, the
stacks together hold exactly the one stack's objects, and a migration's `pulumi state move` URNs are the ones
the programs register, so the moved objects are neither replaced nor deleted."""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.bench import synthetic
from tests.helpers import plan_of, render, stack_raw, with_changes
from trainer_infra.cli import main
from trainer_infra.core.errors import ConfigError
from trainer_infra.diff.compare import Render
from trainer_infra.diff.git import load
from trainer_infra.platform.shard import deploy_team_shard
from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import write
from trainer_infra.stack.shards import affected, check_stack, layout, moves, parse_shard_stack, select, shard_of, split
from trainer_infra.stack.validate import validate


def _real(urn: str) -> str:
    """The mock engine puts the root stack's type into its children's URNs; the real engine leaves it out."""
    return urn.replace("::pulumi:pulumi:Stack$", "::")


def _local(shards: int) -> dict[str, Any]:
    return with_changes(stack_raw("local"), teamShards=shards)


def test_adding_teams_moves_no_team_between_stacks() -> None:
    teams = validate(synthetic(200, 1)).config.teams
    before = {t.name: shard_of(t.name, 8) for t in teams[:150]}
    after = layout("prod", 8, teams)
    assert {name: i for i, names in enumerate(after.teams) for name in names if name in before} == before
    assert min(len(names) for names in after.teams) > 0  # 200 teams spread over every one of 8 stacks


def test_the_stacks_hold_exactly_the_one_stacks_objects_each_team_whole_in_one() -> None:
    raw = _local(3)
    validated = validate(raw)
    plan = plan_of(raw)
    platform, shards = split(plan, validated.config.teams, 3)
    keys = [o.key for p in (platform, *shards) for o in p.objects]
    assert sorted(keys) == sorted(o.key for o in plan.objects)  # nothing lost, nothing twice
    for team in validated.config.teams:
        own = shards[shard_of(team.name, 3)]
        mine = {o.key for o in own.objects}
        assert {f"namespace-{team.resolved_namespace}", f"clusterqueue-{team.name}"} <= mine
        assert f"persistentvolumeclaim-{team.resolved_namespace}-workspace" in mine
        assert f"clusterrole-trainer-platform-queue-reader-{team.name}" in mine
    platform_keys = {o.key for o in platform.objects}
    assert not any(k.startswith("namespace-") and k[10:] in {"nlp", "vision"} for k in platform_keys)
    assert platform.releases == plan.releases and all(not s.releases and not s.gates for s in shards)
    for part in shards:  # a team stack waits only inside itself: the platform stack ran before
        inside = {o.key for o in part.objects}
        assert all(a in inside for o in part.objects for a in o.after)
    team_keys = {o.key for s in shards for o in s.objects}
    assert not any(a in team_keys for o in platform.objects for a in o.after)


def test_a_stack_deploys_its_part_named_by_the_stack() -> None:
    raw = _local(2)
    validated = validate(raw)
    plan = plan_of(raw)
    teams = validated.config.teams
    assert select(plan, teams, 2, "local") == split(plan, teams, 2)[0]
    assert select(plan, teams, 2, "local.teams-01") == split(plan, teams, 2)[1][1]
    assert parse_shard_stack("prod.teams-07") == ("prod", 7) and parse_shard_stack("prod") is None
    with pytest.raises(ConfigError) as exc:
        select(plan, teams, 2, "local.teams-02")
    assert exc.value.issues[0].path == "teamShards" and "no shard 2" in exc.value.issues[0].message


def test_a_team_stack_run_without_its_platforms_config_says_how_to_run_it() -> None:
    with pytest.raises(ConfigError) as exc:
        check_stack("prod.teams-03", 0, "stack prod.teams-03")
    issue = exc.value.issues[0]
    assert issue.path == "teamShards"
    assert "--config-file stacks/Pulumi.prod.yaml" in (issue.hint or "")
    check_stack("prod", 0, "stack prod")  # an ordinary stack is fine


def test_teamshards_is_refused_with_its_path_when_out_of_range(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    path = tmp_path / "Pulumi.big.yaml"
    path.write_text("config:\n  trainer-platform:kubernetes: {version: '1.34'}\n  trainer-platform:teamShards: 500\n")
    assert main(["validate", "--config-file", str(path)]) == 2
    assert "teamShards" in capsys.readouterr().err


def test_migration_moves_name_the_urns_the_programs_register() -> None:
    """From one stack to team stacks: the URNs `pulumi state move` is given are those the one stack registered,
    and where the move puts each (parented to the destination stack) is what the team stack registers."""
    raw = _local(2)
    validated = validate(raw)
    teams = validated.config.teams
    plan = plan_of(raw)
    single = {r.urn for r in capture(lambda: deploy(plan_of(stack_raw("local"))), "local").registrations}
    planned = moves(plan, teams, "local", "trainer-platform", 0, 2)
    assert {m.dest for m in planned} <= set(layout("local", 2, teams).stacks()[1:])
    moved = [u for m in planned for u in m.urns]
    team_objects = sum(1 for p in split(plan, teams, 2)[1] for _ in p.objects)
    assert len(moved) == len(set(moved)) == team_objects and set(moved) <= single
    for move in planned:
        parsed = parse_shard_stack(move.dest)
        assert parsed is not None
        part = split(plan, teams, 2)[1][parsed[1]]
        registered = {_real(r.urn) for r in capture(partial(deploy_team_shard, part), move.dest).registrations}
        landed = {
            re.sub(
                r"^urn:pulumi:[^:]+::([^:]+)::trainer-platform:index:TrainingPlatform\$",
                rf"urn:pulumi:{move.dest}::\1::",
                u,
            )
            for u in move.urns
        }
        assert landed <= registered
        assert f"urn:pulumi:{move.dest}::trainer-platform::pulumi:providers:kubernetes::k8s" in registered
    assert moves(plan, teams, "local", "trainer-platform", 2, 2) == []  # the same count moves nothing


def _render(raw: dict[str, Any], out: Path) -> Render:
    write(render(raw, "local"), out)
    return load(out)


def test_a_pull_request_previews_only_the_stacks_whose_objects_change(tmp_path: Path) -> None:
    raw = _local(4)
    teams = validate(raw).config.teams
    base = _render(raw, tmp_path / "base")
    nlp = next(t for t in teams if t.name == "nlp")
    changed = with_changes(
        raw,
        teams=[
            {**t, "quota": {pool: {**q, "gpus": q["gpus"] - 1} for pool, q in t["quota"].items()}}
            if t["name"] == "nlp"
            else t
            for t in raw["teams"]
        ],
    )
    head = _render(changed, tmp_path / "head")
    own = layout("local", 4, teams).stacks()[1 + shard_of(nlp.name, 4)]
    assert affected(base, head, "local", 4, 4) == [own]  # the platform stack is not previewed
    assert affected(base, base, "local", 4, 4) == []
    assert affected(base, head, "local", 4, 0) == layout("local", 4, teams).stacks()  # a new count: every stack
    assert affected(base, head, "local", 0, 0) == ["local"]  # one stack: always previewed
