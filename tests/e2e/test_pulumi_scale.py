"""A 1,000-team synthetic stack through the real engine, split into team stacks (`teamShards`): what the first
`pulumi up` costs with the engine's default checkpoints on a file backend, against `PULUMI_SKIP_CHECKPOINTS=true`
for the same stacks, and what a one-team change costs to preview.

Opt-in, not part of ``make e2e``: ``make bench-pulumi`` (``BENCH_TEAMS=N`` teams in ``BENCH_SHARDS=K`` team
stacks, ``BENCH_JOBS=J`` of them at once). The stack is ``make bench``'s synthetic one (``tests/bench.py``: N teams
with a GPU quota on one kwok pool; each team brings its namespace, ClusterQueue, LocalQueue and four
NetworkPolicies) on the same empty control plane, chart mirror and toolchain as ``test_pulumi.py``. The module
runs twice, each time on a fresh control plane and file backend: with checkpoints (the default), then without.
Each run: the platform stack's ``up`` (policy pack enforced), then the team stacks' (``.ci/pulumi-shards``, as the
deploy workflow). The default run also previews a one-team quota change (the platform stack must show no change,
the team's stack only that team's ClusterQueue, and the offline render picks that stack alone) and the PR
preview of every deployed stack. Times are printed and
kept in the cache's ``toolchain/e2e-timings.json``; the assertions are about the result, not the clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.bench import synthetic
from tests.e2e.pulumi_stack import STACK, Installation, Result, installation, record_timing
from tests.e2e.versions import REPO_ROOT
from trainer_infra.diff.compare import Render
from trainer_infra.diff.git import load
from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import assemble, write
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.shards import affected, layout, shard_stack
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.e2e

TEAMS = int(os.environ.get("BENCH_TEAMS", "1000"))
#: about 25 teams (~180 resources, ~0.5 MB of state) per stack: each checkpoint stays small
SHARDS = int(os.environ.get("BENCH_SHARDS", str(max(1, TEAMS // 25))))
JOBS = os.environ.get("BENCH_JOBS", "2")
SHARDS_SCRIPT = REPO_ROOT / ".ci" / "pulumi-shards"
#: generous: a cold 2-core machine; the measured times are far below (docs/large-organisations.md)
TIMEOUT = 5400.0
#: the first `up`'s seconds per mode, so the second run can print the ratio
FIRST_UP: dict[str, float] = {}


@dataclass
class Large:
    installed: Installation
    raw: dict[str, Any]
    checkpoints: bool
    objects: set[tuple[str, str, str]]  # (kind, namespace, name) of every object the plan holds

    @property
    def label(self) -> str:
        return "checkpoints" if self.checkpoints else "PULUMI_SKIP_CHECKPOINTS"

    @property
    def env(self) -> dict[str, str]:
        return {} if self.checkpoints else {"PULUMI_SKIP_CHECKPOINTS": "true"}

    def shards(self, *args: str, timeout: float = TIMEOUT) -> Result:
        """`.ci/pulumi-shards <args>` on every team stack, as the workflows run it."""
        project = self.installed.project
        env = {
            **self.env,
            "PULUMI_CONFIG_FILE": str(project.workdir / f"Pulumi.{STACK}.yaml"),
            "PULUMI_SHARD_JOBS": JOBS,
            "PULUMI_SECRETS_PROVIDER": "passphrase",
            "TRAINER_INFRA": str(REPO_ROOT / ".venv" / "bin" / "trainer-infra"),
        }
        return project._exec(["bash", str(SHARDS_SCRIPT), *args], check=True, timeout=timeout, env=env)

    def team_stack(self, *args: str) -> Result:
        """`pulumi <args>` on one team stack, on the platform stack's config file."""
        project = self.installed.project
        config = str(project.workdir / f"Pulumi.{STACK}.yaml")
        return project.run(*args, "--config-file", config, "--policy-pack", str(project.policy_dir), timeout=TIMEOUT)


@pytest.fixture(scope="module", params=[True, False], ids=["checkpoints", "skip-checkpoints"])
def large(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Large]:
    raw = {**synthetic(TEAMS, 1), "teamShards": SHARDS}
    objects = {
        (o.manifest["kind"], o.manifest["metadata"].get("namespace", ""), o.manifest["metadata"]["name"])
        for o in build_plan(validate(raw)).objects
    }
    with installation(tmp_path_factory.mktemp("pulumi-scale"), _stack_file(raw)) as installed:
        yield Large(installed, raw, bool(request.param), objects)


def _render(raw: dict[str, Any], out: Path) -> Render:
    """What `trainer-infra render` writes and `shards --affected-by` compares."""
    validated = validate(raw)
    write(assemble(capture(lambda: deploy(build_plan(validated)), STACK)), out)
    return load(out)


def _stack_file(raw: dict[str, Any]) -> dict[str, Any]:
    return {"config": {f"trainer-platform:{key}": value for key, value in raw.items()}}


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def test_first_up_of_the_team_stacks_creates_every_team(large: Large) -> None:
    started, load = time.monotonic(), _load()
    platform = large.installed.project.up(timeout=TIMEOUT, env=large.env)
    record_timing(f"up, platform stack ({TEAMS} teams in {SHARDS} team stacks, {large.label})", platform)
    teams = large.shards("up", "--yes", "--skip-preview", "--policy-pack", str(large.installed.project.policy_dir))
    record_timing(f"up, {SHARDS} team stacks ({TEAMS} teams, {JOBS} at once, {large.label})", teams)
    FIRST_UP[large.label] = total = round(time.monotonic() - started, 1)
    print(f"[e2e] first up, all stacks ({TEAMS} teams, {large.label}): {total} s; load average {load} → {_load()}")
    if len(FIRST_UP) == 2:
        ratio = FIRST_UP["checkpoints"] / FIRST_UP["PULUMI_SKIP_CHECKPOINTS"]
        print(f"[e2e] checkpoints / PULUMI_SKIP_CHECKPOINTS: {ratio:.2f}×", flush=True)
    client = large.installed.sandbox.client
    namespaces = {n["metadata"]["name"] for n in client.list("v1", "Namespace")}
    planned = {name for kind, _, name in large.objects if kind == "Namespace" and name.startswith("team-")}
    assert len(planned) == TEAMS and planned <= namespaces, sorted(planned - namespaces)[:5]
    planned_queues = {name for kind, _, name in large.objects if kind == "ClusterQueue"}
    queues = {q["metadata"]["name"] for q in client.list("kueue.x-k8s.io/v1beta2", "ClusterQueue")}
    assert len(planned_queues) >= TEAMS and planned_queues <= queues, sorted(planned_queues - queues)[:5]


def test_a_one_team_change_is_previewed_in_its_team_stack_only(large: Large, tmp_path: Path) -> None:
    """The PR workflow previews the stacks whose objects change (`trainer-infra shards --affected-by`, the offline
    render of base and head): a one-team quota change is its team stack alone. The platform stack's preview is run
    too, to prove it has nothing to change; it is not what the pull request pays."""
    if not large.checkpoints:
        pytest.skip("previews do not write checkpoints: measured once")
    project = large.installed.project
    changed = {**large.raw, "teams": [dict(t) for t in large.raw["teams"]]}
    team = changed["teams"][7]
    team["quota"] = {pool: {"gpus": 2} for pool in team["quota"]}
    started = time.monotonic()
    renders = [_render(raw, tmp_path / name) for raw, name in ((large.raw, "base"), (changed, "head"))]
    stacks = affected(renders[0], renders[1], STACK, SHARDS, SHARDS)
    offline = round(time.monotonic() - started, 1)
    found = layout(STACK, SHARDS, validate(changed).config.teams)
    own = shard_stack(STACK, next(i for i, names in enumerate(found.teams) if team["name"] in names), SHARDS)
    assert stacks == [own]
    project.write_stack(large.installed.config(_stack_file(changed)))
    try:
        preview = large.team_stack("preview", "--diff", "--stack", own)
        platform = project.preview("--expect-no-changes", timeout=TIMEOUT)
    finally:
        project.write_stack(large.installed.config(_stack_file(large.raw)))
    print(f"[e2e] which stacks a one-team change touches, offline ({TEAMS} teams): {offline} s")
    record_timing(f"preview of a one-team change, its team stack ({TEAMS} teams in {SHARDS})", preview)
    record_timing(f"preview of a one-team change, platform stack, no change expected ({TEAMS} teams)", platform)
    assert "1 to update" in preview.output and f"clusterqueue-{team['name']}" in preview.output, preview.output[-3000:]
    assert platform.returncode == 0  # --expect-no-changes: the platform stack does not change


def test_the_pr_preview_of_the_deployed_stacks_changes_nothing(large: Large) -> None:
    """What every pull request pays once the stacks are live (the platform, then every team stack)."""
    if not large.checkpoints:
        pytest.skip("previews do not write checkpoints: measured once")
    platform = large.installed.project.preview("--expect-no-changes", timeout=TIMEOUT)
    record_timing(f"preview, platform stack ({TEAMS} teams, no change)", platform)
    teams = large.shards("preview", "--expect-no-changes", "--policy-pack", str(large.installed.project.policy_dir))
    record_timing(f"preview, {SHARDS} team stacks ({TEAMS} teams, {JOBS} at once, no change)", teams)
    assert platform.returncode == 0 and teams.returncode == 0
