"""One `simulate` run: a throwaway control plane, the stack's objects, the replay, and nothing left behind.

The control plane (trainer_infra/sandbox) runs in a temporary folder with its own ports; whatever happens
(an error, Ctrl-C, SIGTERM) its processes are stopped and the folder removed before this returns.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.simulate.facts import StackFacts
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.run import Run
from trainer_infra.simulate.timers import compressed_settings
from trainer_infra.simulate.trace import TraceError, TraceRow
from trainer_infra.simulate.work import DEFAULT_CHECKPOINT_SECONDS

Obj = dict[str, Any]
#: Chart name fragment → the control plane's version of that component.
CHARTS = ("kueue", "jobset", "trainer")


def chart_mismatches(releases: Sequence[Obj], versions: Any) -> list[str]:
    """Components whose chart version in the render differs from the control plane's binary."""
    out = []
    for release in releases:
        chart, version = str(release.get("chart", "")).lower(), str(release.get("version", "")).removeprefix("v")
        for component in CHARTS:
            if component in chart and version and version != getattr(versions, component):
                out.append(
                    f"{component}: the stack pins {version}, the control plane runs {getattr(versions, component)}"
                )
    return out


def partition(
    facts: StackFacts, rows: Sequence[TraceRow], checkpoint: float = DEFAULT_CHECKPOINT_SECONDS
) -> tuple[list[TraceRow], list[JobOutcome]]:
    """Rows to replay, and outcomes of the rows Kueue could never admit (reported, never submitted)."""
    facts.check(rows)
    replay, never = [], []
    for row in rows:
        why = facts.never_admissible(row)
        if why is None:
            replay.append(row)
            continue
        never.append(facts.outcome(row, checkpoint, never_admissible=why))
    return replay, never


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process of the control plane used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def simulate(
    facts: StackFacts,
    releases: Sequence[Obj],
    rows: Sequence[TraceRow],
    *,
    compression: float,
    bound: float,
    label: str = "",
    progress: Callable[[str], None] = print,
    checkpoint: float = DEFAULT_CHECKPOINT_SECONDS,
) -> Run:
    """Replay `rows` on a fresh control plane running the render `facts` came from."""
    from trainer_infra.sandbox.apply import (
        apply_objects,
        bind_claims,
        kueue_settings,
        wait_nodes_ready,
    )
    from trainer_infra.sandbox.controlplane import Sandbox
    from trainer_infra.sandbox.versions import VersionSet, check_binaries
    from trainer_infra.simulate.replay import Replay

    replay_rows, never = partition(facts, rows, checkpoint)
    cpu: dict[str, float] = {}
    if threading.current_thread() is threading.main_thread():
        # a shell starts background commands with SIGINT ignored, and Python keeps it so: `kill -INT` (what a
        # script or CI uses to stop a run early) would then be lost instead of ending the replay with its report
        signal.signal(signal.SIGINT, signal.default_int_handler)
    versions = VersionSet.from_env()
    mismatches = chart_mismatches(releases, versions)
    if mismatches:
        hint = "pin the stack's components to the control plane's versions, or set SANDBOX_<COMPONENT>_VERSION"
        raise TraceError([ConfigIssue("components", "; ".join(mismatches), None, hint)], "the stack")
    check_binaries(versions)
    settings, kueue_changes = compressed_settings(kueue_settings(list(releases)), compression)
    phases: dict[str, float] = {}
    started = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="trainer-simulate-"))
    # the controllers run as their charts' ServiceAccounts with the charts' RBAC: the stack's admission policies
    # trust those names only, and the replay sees what a cluster's controllers may do
    sandbox = Sandbox(workdir / "control-plane", versions, kueue_settings=settings, helm_releases=releases)
    try:
        progress(f"starting the control plane (Kubernetes {versions.kubernetes}, Kueue {versions.kueue}) ...")
        sandbox.start()
        phases["start control plane"] = time.monotonic() - started
        mark = time.monotonic()
        apply_objects(sandbox.client, facts.objects)
        bind_claims(sandbox.client, [o for o in facts.objects if o["kind"] == "PersistentVolumeClaim"])
        wait_nodes_ready(sandbox.client, [n["metadata"]["name"] for n in facts.objects if n["kind"] == "Node"])
        phases["apply stack"] = time.monotonic() - mark
        progress(f"replaying {len(replay_rows)} jobs at {compression:g}× ({len(never)} never admissible) ...")
        mark, cpu_mark = time.monotonic(), time.process_time()
        at_start = {proc.name: cpu_seconds(proc.pid) for proc in sandbox.processes}
        replay = Replay(
            sandbox.client,
            facts,
            replay_rows,
            compression,
            bound=bound,
            progress=progress,
            versions=versions,
            checkpoint=checkpoint,
        )
        jobs = replay.run()
        phases["replay"] = time.monotonic() - mark
        # the replay's share only: the control plane's start (CRDs, OpenAPI) costs the API server a lot
        cpu = {proc.name: cpu_seconds(proc.pid) - at_start.get(proc.name, 0.0) for proc in sandbox.processes}
        cpu["replay (this process)"] = time.process_time() - cpu_mark
    finally:
        mark = time.monotonic()
        sandbox.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        phases["stop control plane"] = time.monotonic() - mark
    return Run(
        jobs=[*jobs, *never],
        capacity=facts.capacity,
        weights=facts.weights(),
        quotas=facts.team_quotas(),
        compression=compression,
        until=replay.ended,
        wall_seconds=time.monotonic() - started,
        stopped_early=replay.stopped_early,
        limits=facts.limits,
        samples=replay.samples,
        phases=phases,
        label=label,
        submit_lag=replay.submit_lag,
        cpu_seconds=cpu,
        load_average=replay.load,
        kueue_changes=kueue_changes,
        checkpoint=checkpoint,
        resume_failures=replay.resume_failures,
    )
