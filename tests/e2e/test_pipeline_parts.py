"""``make e2e``'s two lanes (tests/e2e/pipeline.py) with stand-in builds and sessions: what overlaps, what never does,
and what a failure stops (run in ``make test``, no binaries needed)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.e2e.pipeline import TOOLS, Pipeline, Plan, controlplane_targets
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.versions import VersionSet

#: seconds each stand-in step takes: long enough that an overlap (or its absence) is unambiguous
STEP = 0.2


class Recorded(Pipeline):
    """Builds and sessions that only sleep and record when they ran."""

    fail: frozenset[str] = frozenset()
    session_codes: dict[str, int] = {}  # noqa: RUF012 (overridden per test, read-only)

    def __init__(self, run_plan: Plan) -> None:
        super().__init__(run_plan, VersionSet.from_env())
        self.spans: dict[str, tuple[float, float]] = {}
        self.guard = threading.Lock()

    def step(self, name: str, seconds: float = STEP) -> dict[str, float]:
        began = time.monotonic()
        time.sleep(seconds)
        with self.guard:
            self.spans[name] = (began, time.monotonic())
        if name in self.fail:
            from trainer_infra.sandbox.build import BuildError

            raise BuildError(f"{name} failed (stand-in)")
        return {name: seconds}

    def build_controlplane(self) -> dict[str, float]:
        return self.step("controlplane", 3 * STEP)

    def build_node(self) -> dict[str, float]:
        return self.step("node-binaries")

    def build_toolchain(self) -> dict[str, float]:
        return self.step("toolchain", 8 * STEP)

    def build_images(self) -> dict[str, float]:
        return self.step("images")

    def build_tools(self) -> dict[str, float]:
        return self.step("tools-binaries")

    def session(self, name: str, files: tuple[str, ...], *, in_netns: bool) -> int:
        self.step(name, {"harness": 6 * STEP, "tools": STEP}.get(name, 2 * STEP))
        return self.session_codes.get(name, 0)


def plan(**overrides: tuple[str, ...]) -> Plan:
    files = {"installed": ("i.py",), "harness": ("h.py",), "node": ("n.py",), "sandbox": ("s.py",), **overrides}
    return Plan(
        installed=files["installed"],
        harness=files["harness"],
        node=files["node"],
        sandbox=files["sandbox"],
        pytest_args=(),
        env={},
        tools=files.get("tools", ("t.py",)),
    )


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_real_node_sessions_run_one_at_a_time_and_the_harness_beside_them() -> None:
    run = Recorded(plan())
    assert run.run() == 0
    s = run.spans
    # node, install, sandbox: each after the previous, in this order
    assert s["node"][1] <= s["install"][0] and s["install"][1] <= s["sandbox"][0]
    # the harness needs only the control plane: it runs while the toolchain still builds
    assert s["controlplane"][1] <= s["harness"][0] and overlap(s["harness"], s["toolchain"])
    # the node's session does not wait for the toolchain; the install session does
    assert s["node"][0] < s["toolchain"][1] <= s["install"][0]
    # the stand-in images build from the start (beside the control plane's build), before the sandbox's session
    assert overlap(s["images"], s["controlplane"]) and s["images"][1] <= s["sandbox"][0]
    # one Builder at a time (its lock): the node's binaries after the control plane's, the test tools (only their
    # own session needs them) after the node's, never before the install session's builds
    assert s["controlplane"][1] <= s["node-binaries"][0] and s["node-binaries"][1] <= s["tools-binaries"][0]
    assert s["harness"][1] <= s["tools-binaries"][0] and s["tools-binaries"][1] <= s["tools"][0]


def test_the_sandbox_beside_the_install_session_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """E2E_SANDBOX_BESIDE_INSTALL=1: each on a node of its own, after the node session."""
    monkeypatch.setenv("E2E_SANDBOX_BESIDE_INSTALL", "1")
    run = Recorded(plan())
    assert run.run() == 0
    s = run.spans
    assert s["node"][1] <= s["sandbox"][0] and overlap(s["install"], s["sandbox"])


def test_the_control_plane_build_leaves_out_the_node_the_tools_and_every_opt_in_binary() -> None:
    builder = Builder(VersionSet.from_env())
    built = controlplane_targets(builder)
    targets = {t.name: t for t in builder.targets()}
    assert {"kube-apiserver", "kueue-manager", "trainer-controller-manager", "promql-names"} <= built
    assert "karpenter-kwok" in targets and targets["karpenter-kwok"].opt_in and "karpenter-kwok" not in built
    assert not built & ({n for n, t in targets.items() if t.node} | set(TOOLS))


def test_the_run_takes_its_longest_lane_not_the_sum_of_its_parts() -> None:
    run = Recorded(plan())
    began = time.monotonic()
    run.run()
    took = time.monotonic() - began
    serial = sum(end - start for start, end in run.spans.values())
    assert took < serial - 6 * STEP, (took, serial)


def test_a_failed_control_plane_build_runs_no_session_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    run = Recorded(plan())
    run.fail = frozenset({"controlplane"})
    assert run.run() == 1
    # the toolchain and the images already running are waited for
    assert set(run.spans) == {"controlplane", "toolchain", "images"}
    assert "build: control plane failed: controlplane failed (stand-in)" in capsys.readouterr().err


def test_a_failed_toolchain_build_skips_the_sessions_that_need_it_only() -> None:
    run = Recorded(plan())
    run.fail = frozenset({"toolchain"})
    assert run.run() == 1
    assert {"harness", "node", "tools"} <= set(run.spans) and not {"install", "sandbox"} & set(run.spans)


def test_every_session_runs_and_the_run_exits_with_the_highest_code(capsys: pytest.CaptureFixture[str]) -> None:
    run = Recorded(plan())
    run.session_codes = {"harness": 1, "node": 2}
    assert run.run() == 2
    assert {"harness", "node", "install", "sandbox"} <= set(run.spans)
    table = capsys.readouterr().out
    for part, result in [("session: node", "exit 2"), ("session: harness", "exit 1"), ("session: install", "ok")]:
        assert any(part in line and line.endswith(result) for line in table.splitlines()), table
    assert "[e2e] all parts:" in table


def test_without_the_real_node_only_the_harness_lane_runs() -> None:
    run = Recorded(plan(installed=(), node=(), sandbox=()))
    assert run.run() == 0
    assert set(run.spans) == {"controlplane", "harness", "tools-binaries", "tools"}


def test_a_session_output_is_prefixed_with_its_name_and_its_code_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real pytest process: its lines arrive whole, each prefixed (two sessions may write at once)."""
    (tmp_path / "test_one.py").write_text("def test_fails():\n    print('hello from the session')\n    assert False\n")
    run = Pipeline(
        Plan(installed=(), harness=(), node=(), sandbox=(), pytest_args=("-s", "-q"), env={}),
        VersionSet.from_env(),
    )
    run.plan.env.update({"PATH": "/usr/bin:/bin"})
    assert run.session("harness", (str(tmp_path / "test_one.py"),), in_netns=False) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith("[harness] ") for line in lines), lines
    assert "[harness] hello from the session" in "\n".join(lines)
