"""A 1,000-team synthetic stack through the real engine: what `pulumi preview` and `pulumi up` cost at scale.

Opt-in, not part of ``make e2e``: ``make bench-pulumi`` (``BENCH_TEAMS=N`` for another size). The stack is
``make bench``'s synthetic one (``tests/bench.py``: N teams with a GPU quota on one kwok pool; each team brings its
namespace, ClusterQueue, LocalQueue and four NetworkPolicies) on the same empty control plane, chart mirror and
toolchain as ``test_pulumi.py``. The steps are what a platform team pays: the PR preview (``.ci/pulumi-preview``
with the policy pack) on an empty cluster, ``pulumi up``, then the PR preview of the deployed stack. Times are
printed and kept in the cache's ``toolchain/e2e-timings.json``; the assertions are about the result, not the clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.bench import synthetic
from tests.e2e.pulumi_stack import Installation, installation, kind_name, record_timing
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

pytestmark = pytest.mark.e2e

TEAMS = int(os.environ.get("BENCH_TEAMS", "1000"))
#: With checkpoints the engine rewrites the whole state file after every step: O(steps × state). Measured at 1,000
#: teams: 24 min into `pulumi up`, 2,521 of ~7,150 resources were recorded (state 12.8 MB, the engine at ~1.4 cores),
#: on course for well over an hour. ``BENCH_CHECKPOINTS=1`` measures that path; docs/preview.md ("Large stacks")
#: says when to skip them.
CHECKPOINTS = os.environ.get("BENCH_CHECKPOINTS") == "1"
#: generous: a cold 2-core machine; the measured times are far below (see the README of tests/e2e)
TIMEOUT = 5400.0


@dataclass
class Large:
    installed: Installation
    objects: set[tuple[str, str, str]]  # (kind, namespace, name) of every object the plan holds


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Large]:
    raw = synthetic(TEAMS, 1)
    objects = {
        (o.manifest["kind"], o.manifest["metadata"].get("namespace", ""), o.manifest["metadata"]["name"])
        for o in build_plan(validate(raw)).objects
    }
    base: dict[str, Any] = {"config": {f"trainer-platform:{key}": value for key, value in raw.items()}}
    with installation(tmp_path_factory.mktemp("pulumi-scale"), base) as installed:
        yield Large(installed, objects)


def test_preview_of_a_large_stack_plans_every_object(large: Large) -> None:
    result = large.installed.project.preview("--json", timeout=TIMEOUT)
    record_timing(f"preview ({TEAMS} teams, empty cluster)", result)
    planned = {kind_name(s) for s in result.steps() if s["op"] == "create"}
    missing = sorted(large.objects - planned)
    assert not missing, f"{len(missing)} objects absent from `pulumi preview`, e.g. {missing[:5]}"


def test_up_of_a_large_stack_creates_every_team(large: Large) -> None:
    env = {} if CHECKPOINTS else {"PULUMI_SKIP_CHECKPOINTS": "true"}
    result = large.installed.project.up(timeout=TIMEOUT, env=env)
    record_timing(f"up ({TEAMS} teams, empty cluster{'' if CHECKPOINTS else ', PULUMI_SKIP_CHECKPOINTS'})", result)
    client = large.installed.sandbox.client
    namespaces = {n["metadata"]["name"] for n in client.list("v1", "Namespace")}
    teams = {name for kind, _, name in large.objects if kind == "Namespace" and name.startswith("team-")}
    assert len(teams) == TEAMS and teams <= namespaces, sorted(teams - namespaces)[:5]
    planned_queues = {name for kind, _, name in large.objects if kind == "ClusterQueue"}
    queues = {q["metadata"]["name"] for q in client.list("kueue.x-k8s.io/v1beta2", "ClusterQueue")}
    assert len(planned_queues) >= TEAMS and planned_queues <= queues, sorted(planned_queues - queues)[:5]


def test_preview_of_the_deployed_large_stack_changes_nothing(large: Large) -> None:
    """What every pull request pays once the stack is live."""
    result = large.installed.project.preview("--expect-no-changes", timeout=TIMEOUT)
    record_timing(f"preview ({TEAMS} teams, no change)", result)
    assert result.returncode == 0
