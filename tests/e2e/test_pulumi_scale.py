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

import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bench import synthetic
from tests.e2e.pulumi_steps import record_timing
from trainer_infra.diff.compare import Render
from trainer_infra.diff.git import load
from trainer_infra.platform.objects import type_token
from trainer_infra.program import deploy
from trainer_infra.render.capture import capture
from trainer_infra.render.output import assemble, write
from trainer_infra.sandbox.chart_sandbox import ChartSandbox
from trainer_infra.sandbox.pulumi_stack import STACK, Installation, Result, chart_archives, installation
from trainer_infra.sandbox.versions import CHECKOUT
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.shards import affected, layout, shard_stack, split
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.e2e

TEAMS = int(os.environ.get("BENCH_TEAMS", "1000"))
#: about 25 teams (~180 resources, ~0.5 MB of state) per stack: each checkpoint stays small
SHARDS = int(os.environ.get("BENCH_SHARDS", str(max(1, TEAMS // 25))))
JOBS = os.environ.get("BENCH_JOBS", "2")
SHARDS_SCRIPT = CHECKOUT / ".ci" / "pulumi-shards"
#: generous: a cold 2-core machine; the measured times are far below (docs/large-organisations.md)
TIMEOUT = 5400.0
#: ``BENCH_FLOOR=1`` adds a third run: the platform stack by our program, then each team stack's rendered objects
#: registered by a trivial Pulumi program (``FLOOR_PROGRAM``), default checkpoints: the floor of the team stacks
FLOOR = os.environ.get("BENCH_FLOOR") == "1"
MODES = ["checkpoints", "PULUMI_SKIP_CHECKPOINTS", *(["floor"] if FLOOR else [])]
#: the first `up`'s seconds of the team stacks per mode, so later runs can say the ratio
TEAM_STACKS_UP: dict[str, float] = {}
#: the no-change preview's seconds of the team stacks (the default run), for the floor's ratio
TEAM_STACKS_PREVIEW: dict[str, float] = {}
FLOOR_PROGRAM = """\"\"\"The floor: a team stack's objects registered as they are, with their dependencies (no config,
validation, plan, StackReference or policy pack).\"\"\"
import json

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes import _utilities

spec = json.load(open(f"objects-{pulumi.get_stack()}.json"))
provider = k8s.Provider("k8s", context=spec["context"], enable_patch_force=True)
created = {}
for o in spec["objects"]:
    opts = pulumi.ResourceOptions(
        provider=provider, depends_on=[created[d] for d in o["dependsOn"]], version=_utilities.get_version()
    )
    created[o["name"]] = pulumi.CustomResource(o["type"], o["name"], o["manifest"], opts)
"""


@dataclass
class Large:
    installed: Installation
    raw: dict[str, Any]
    label: str  # one of MODES
    objects: set[tuple[str, str, str]]  # (kind, namespace, name) of every object the plan holds

    @property
    def checkpoints(self) -> bool:
        return self.label == "checkpoints"

    @property
    def env(self) -> dict[str, str]:
        return {"PULUMI_SKIP_CHECKPOINTS": "true"} if self.label == "PULUMI_SKIP_CHECKPOINTS" else {}

    def shards(self, *args: str, timeout: float = TIMEOUT) -> Result:
        """`.ci/pulumi-shards <args>` on every team stack, as the workflows run it."""
        project = self.installed.project
        env = {
            **self.env,
            "PULUMI_CONFIG_FILE": str(project.workdir / f"Pulumi.{STACK}.yaml"),
            "PULUMI_SHARD_JOBS": JOBS,
            "PULUMI_SECRETS_PROVIDER": "passphrase",
            "TRAINER_INFRA": str(CHECKOUT / ".venv" / "bin" / "trainer-infra"),
        }
        return project._exec(["bash", str(SHARDS_SCRIPT), *args], check=True, timeout=timeout, env=env)

    def team_stack(self, *args: str) -> Result:
        """`pulumi <args>` on one team stack, on the platform stack's config file."""
        project = self.installed.project
        config = str(project.workdir / f"Pulumi.{STACK}.yaml")
        return project.run(*args, "--config-file", config, "--policy-pack", str(project.policy_dir), timeout=TIMEOUT)


class _BenchSandbox(ChartSandbox):
    """Without kube-router: at 4,000 NetworkPolicies its iptables rewrites took a core of this 2-core machine
    (docs/large-organisations.md), work a cluster does on its nodes, not where `pulumi up` runs."""

    firewall = False


@pytest.fixture(scope="module", params=MODES)
def large(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Large]:
    raw = {**synthetic(TEAMS, 1), "teamShards": SHARDS}
    objects = {
        (o.manifest["kind"], o.manifest["metadata"].get("namespace", ""), o.manifest["metadata"]["name"])
        for o in build_plan(validate(raw)).objects
    }
    work = tmp_path_factory.mktemp("pulumi-scale")
    with installation(work, _stack_file(raw), _BenchSandbox(work / "sandbox", archives=chart_archives())) as installed:
        yield Large(installed, raw, str(request.param), objects)


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


def _note(step: str, seconds: float) -> None:
    record_timing(step, Result((), 0, "", "", round(seconds, 1)))


def _floor(large: Large) -> tuple[float, float]:
    """Each team stack's objects by FLOOR_PROGRAM, in stacks of their own (`floor-NN`), JOBS at once: the seconds
    of their first `up`, then of their no-change preview."""
    project = large.installed.project
    floor = project.workdir / "floor"
    floor.mkdir()
    spec = yaml.safe_load((project.workdir / "Pulumi.yaml").read_text())
    (floor / "Pulumi.yaml").write_text(
        yaml.safe_dump({"name": "floor", "runtime": {**spec["runtime"], "options": spec["runtime"]["options"]}})
    )
    (floor / "__main__.py").write_text(FLOOR_PROGRAM)
    validated = validate(large.raw)
    context = large.installed.config(_stack_file(large.raw))["config"]["trainer-platform:kubernetes"]["context"]
    _, parts = split(build_plan(validated), validated.config.teams, SHARDS)
    names = []
    for i, part in enumerate(parts):
        keys = {o.key for o in part.objects}
        namespaces = {o.manifest["metadata"]["name"]: o.key for o in part.objects if o.manifest["kind"] == "Namespace"}
        objects = [
            {
                "type": type_token(o.manifest["apiVersion"], o.manifest["kind"]),
                "name": o.key,
                "manifest": o.manifest,
                "dependsOn": sorted(
                    {a for a in o.after if a in keys}
                    | ({namespaces[ns]} if (ns := o.manifest["metadata"].get("namespace")) in namespaces else set())
                ),
            }
            for o in part.objects
        ]
        name = f"floor-{i:02d}"
        (floor / f"objects-{name}.json").write_text(json.dumps({"context": context, "objects": objects}))
        names.append(name)

    def each(commands: list[list[str]]) -> float:
        def one(name: str) -> None:
            for cmd in commands:
                project.run("--cwd", str(floor), *cmd, "--stack", name, timeout=TIMEOUT)

        started = time.monotonic()
        with ThreadPoolExecutor(int(JOBS)) as pool:
            list(pool.map(one, names))
        return time.monotonic() - started

    up = each([["stack", "init"], ["up", "--yes", "--skip-preview"]])
    return up, each([["preview", "--expect-no-changes"]])


def test_first_up_of_the_team_stacks_creates_every_team(large: Large) -> None:
    started, load = time.monotonic(), _load()
    project = large.installed.project
    platform = project.up(timeout=TIMEOUT, env=large.env)
    record_timing(f"up, platform stack ({TEAMS} teams in {SHARDS} team stacks, {large.label})", platform)
    if large.label == "floor":
        seconds, preview = _floor(large)
        _note(f"up, {SHARDS} team stacks by the trivial floor program ({TEAMS} teams, {JOBS} at once)", seconds)
        _note(f"preview, {SHARDS} team stacks by the trivial floor program (no change, {JOBS} at once)", preview)
        if "checkpoints" in TEAM_STACKS_PREVIEW:
            ratio = TEAM_STACKS_PREVIEW["checkpoints"] / preview
            print(f"[e2e] team stacks' no-change preview, ours / floor: {ratio:.2f}×", flush=True)
    else:
        teams = large.shards("up", "--yes", "--skip-preview", "--policy-pack", str(project.policy_dir))
        record_timing(f"up, {SHARDS} team stacks ({TEAMS} teams, {JOBS} at once, {large.label})", teams)
        seconds = teams.seconds
        total = time.monotonic() - started
        _note(f"first up, every stack ({TEAMS} teams, {large.label}; load average {load} → {_load()})", total)
    TEAM_STACKS_UP[large.label] = seconds
    if large.label != "checkpoints" and "checkpoints" in TEAM_STACKS_UP:
        ratio = TEAM_STACKS_UP["checkpoints"] / seconds
        print(f"[e2e] team stacks' first up, checkpoints / {large.label}: {ratio:.2f}×", flush=True)
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
        pytest.skip("measured once, in the default run")
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
        pytest.skip("measured once, in the default run")
    platform = large.installed.project.preview("--expect-no-changes", timeout=TIMEOUT)
    record_timing(f"preview, platform stack ({TEAMS} teams, no change)", platform)
    teams = large.shards("preview", "--expect-no-changes", "--policy-pack", str(large.installed.project.policy_dir))
    record_timing(f"preview, {SHARDS} team stacks ({TEAMS} teams, {JOBS} at once, no change)", teams)
    TEAM_STACKS_PREVIEW[large.label] = teams.seconds
    assert platform.returncode == 0 and teams.returncode == 0
