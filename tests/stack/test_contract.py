"""The config contract as a property, because users write stack files nobody listed: whatever stack file a user
writes, `render` either exits 0 with objects the API server, the pinned controllers' schemas/CEL and the kubeflow
SDK accept, or exits 2 naming config paths — never a traceback, never another exit code, never unbounded time.

Configs come from two strategies: `valid_stacks()` builds stacks the docs promise work (they must render),
`mutated_stacks()` breaks one of them at a random place with a hostile value, an unknown key, a
duplicate or a deletion. Examples are few and derandomized so CI stays fast and reproducible; set
HYPOTHESIS_PROFILE=deep for a long local hunt.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import re
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conformance import Conformance
from tests.helpers import crd_versions
from tests.sdk_harness import FakeCluster, sdk_against
from trainer_infra.cli import main
from trainer_infra.stack.load import read_file
from trainer_infra.stack.validate import validate

# CI: few examples, the same ones every run, no shrinking (a failure prints the example as generated).
settings.register_profile(
    "ci",
    max_examples=15,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
settings.register_profile("deep", max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
BUDGET_SECONDS = 60  # one render of a generated stack takes 1-5 s here; a hang is a failure, not a wait

NAME = st.from_regex(r"\A[a-z][a-z0-9]{0,6}\Z")
LEVELS = ("block", "rack", "hostname")


@st.composite
def pools(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(NAME, min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        node: dict[str, Any] = {
            "cpu": draw(st.sampled_from(["8", "96", "1500m"])),
            "memory": draw(st.sampled_from(["64Gi", "1536Gi", "512Mi"])),
        }
        if draw(st.booleans()):
            node["accelerator"] = {"count": draw(st.integers(1, 8))}
        backend = draw(st.sampled_from(["kwok", "kwok", "static"]))
        pool: dict[str, Any] = {"name": name, "backend": backend, "node": node}
        if backend == "kwok":
            pool["kwok"] = {"layout": draw(st.lists(st.integers(1, 3), min_size=3, max_size=3))}
        else:
            pool["static"] = {"nodeSelector": {"example.com/pool": name}}
            pool["size"] = {"count": draw(st.integers(1, 4))}
        out.append(pool)
    return out


def _nodes(pool: dict[str, Any]) -> int:
    if pool["backend"] == "kwok":
        n = 1
        for c in pool["kwok"]["layout"]:
            n *= c
        return n
    return int(pool["size"]["count"])


@st.composite
def valid_stacks(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {"kubernetes": {"version": "1.34"}}  # the minor whose schemas the harness ships
    node_pools = draw(pools())
    raw["nodePools"] = node_pools
    team_names = draw(st.lists(NAME, max_size=3, unique=True))
    teams: list[dict[str, Any]] = []
    for name in team_names:
        team: dict[str, Any] = {"name": name, "members": {"users": [f"{name}@example.com"]}}
        quota: dict[str, Any] = {}
        for pool in node_pools:
            acc = pool["node"].get("accelerator")
            if acc and draw(st.booleans()):
                quota[pool["name"]] = {
                    "gpus": draw(st.integers(0, acc["count"] * _nodes(pool) // max(1, len(team_names))))
                }
        if quota:
            team["quota"] = quota
        if draw(st.booleans()):
            team["secrets"] = {"hfToken": {"secure": "v1:abc"}}
        teams.append(team)
    raw["teams"] = teams
    if bool(teams) and draw(st.booleans()):
        raw["storage"] = draw(
            st.sampled_from(
                [
                    {"nfs": {"inClusterServer": {"enabled": True}}},
                    {"existing": {"className": "rwx"}},
                    {"efs": {"fileSystemId": "fs-0123abcd"}},
                ]
            )
        )
    if all(p["backend"] == "kwok" for p in node_pools) and draw(st.booleans()):
        mode = draw(st.sampled_from(["required", "preferred"]))
        raw["queues"] = {"placement": {"default": {mode: draw(st.sampled_from(LEVELS))}}}
    if draw(st.booleans()):
        raw["queues"] = {
            **raw.get("queues", {}),
            "priorityClasses": [
                {"name": n, "value": v}
                for n, v in zip(
                    draw(st.lists(NAME, min_size=1, max_size=3, unique=True)),
                    draw(st.lists(st.integers(-(2**31), 2**31 - 1), min_size=3, max_size=3)),
                    strict=False,
                )
            ],
        }
    return raw


HOSTILE: tuple[Any, ...] = (
    -1,
    0,
    2**31,
    10**30,
    1.5,
    "-1",
    "1.5",
    "",
    " ",
    "UPPER",
    "a b",
    "a" * 300,
    "../x",
    "kwok-system",
    "kube-system",
    "hf-token",
    "-1Gi",
    "0.5",
    "x:latest",
    "mirror.corp:99999",
    None,
    [],
    {},
    True,
    "2024-01-01",
    {"secure": "v1:x"},
)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))


def _set(raw: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        raw = raw[part]
    raw[path[-1]] = value


@st.composite
def mutated_stacks(draw: st.DrawFn) -> dict[str, Any]:
    raw = copy.deepcopy(draw(valid_stacks()))
    places = [p for p, _ in _leaves(raw) if p]
    path = draw(st.sampled_from(places))
    kind = draw(st.sampled_from(["replace", "replace", "unknown-key", "duplicate", "delete"]))
    parent: Any = raw
    for part in path[:-1]:
        parent = parent[part]
    if kind == "replace":
        _set(raw, path, copy.deepcopy(draw(st.sampled_from(HOSTILE))))
    elif kind == "unknown-key" and isinstance(parent, dict):
        key = str(path[-1])
        parent[draw(st.sampled_from([key[:-1] or "x", key + "s", key.upper(), "extra"]))] = 1
    elif kind == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[path[-1]]))
    elif isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent.pop(path[-1])
    return raw


@contextlib.contextmanager
def _budget(seconds: int) -> Iterator[None]:
    def expired(*_: Any) -> None:
        raise TimeoutError(f"render took more than {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


ISSUE_LINE = re.compile(r"^  (\S+): ")


def run_contract(raw: dict[str, Any]) -> int:
    """Render `raw` through the CLI and assert the contract; returns the exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        stack = Path(tmp) / "Pulumi.contract.yaml"
        stack.write_text(yaml.safe_dump({"config": {f"trainer-platform:{k}": v for k, v in raw.items()}}))
        out, err = io.StringIO(), io.StringIO()
        with _budget(BUDGET_SECONDS), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["render", "--config-file", str(stack), "--out", str(Path(tmp) / "out")])
        stderr = err.getvalue()
        assert "Traceback" not in stderr, stderr
        assert code in (0, 2), f"exit {code}\n{stderr}"
        if code == 2:
            assert f"error(s) in {stack}" in stderr, stderr
            issues = [line for line in stderr.splitlines() if line.startswith("  ") and not line.startswith("    ")]
            assert issues and all(ISSUE_LINE.match(line) for line in issues), stderr
            assert not (Path(tmp) / "out").exists(), "a refused render must not leave output behind"
            return code
        manifests = [m for m in yaml.safe_load_all((Path(tmp) / "out" / "manifests.yaml").read_text()) if m]
        validated = validate(*read_file(stack)[:1], str(stack))
    checker = Conformance(validated.config.kubernetes.version, crd_versions(validated))
    findings = checker.check_all(manifests)
    assert not findings, "\n".join(map(str, findings))
    runtimes = [m for m in manifests if m["kind"] in ("ClusterTrainingRuntime", "TrainingRuntime")]
    with sdk_against(FakeCluster(runtimes)) as sdk:
        assert len(sdk.list_runtimes()) == sum(m["kind"] == "ClusterTrainingRuntime" for m in runtimes)
    return code


@settings(settings.get_profile(PROFILE))
@given(valid_stacks())
def test_every_documented_stack_renders_and_conforms(raw: dict[str, Any]) -> None:
    assert run_contract(raw) == 0


@settings(settings.get_profile(PROFILE))
@given(mutated_stacks())
def test_any_mutation_is_refused_with_a_path_or_renders_conformant_objects(raw: dict[str, Any]) -> None:
    run_contract(raw)
