"""`trainer-infra simulate` end to end: the example trace replayed on the `local` stack with the real Kueue,
JobSet and Trainer, through the CLI a platform engineer runs; then an interrupted run that must leave nothing.

Conservation: every job finished or was reported never admissible; the accelerator-seconds the finished jobs
held equal the trace's plus the control plane's own latency (measured, a few wall seconds per job); no
ClusterQueue ever held more than its nominal quota + what it may borrow (sampled from its status).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer_infra.sandbox.leftovers import processes_of
from trainer_infra.sandbox.versions import CHECKOUT
from trainer_infra.simulate.trace import load_trace

pytestmark = pytest.mark.e2e
TRACE = CHECKOUT / "docs" / "simulate" / "example-trace.csv"
COMPRESSION = 60.0


def simulate(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "trainer_infra", "simulate", "--stack", "local", "--out", str(tmp_path / "out")]
    # Ctrl-C as at a terminal: a shell's background job (CI, nohup) starts with SIGINT ignored, which Python keeps
    return subprocess.Popen(
        [*cmd, *extra],
        cwd=CHECKOUT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_the_example_trace_replays_and_conserves_work(tmp_path: Path) -> None:
    proc = simulate(tmp_path, "--trace", str(TRACE), "--compression", str(COMPRESSION), "--max-wall", "900")
    out, err = proc.communicate(timeout=1500)
    assert proc.returncode == 0, f"simulate exited {proc.returncode}:\n{out}\n{err[-4000:]}"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    rows = {r["job"]: r for r in csv.DictReader((tmp_path / "out" / "jobs.csv").open())}
    trace = load_trace(TRACE)
    assert set(rows) == {r.name for r in trace}
    assert {r["status"] for r in rows.values()} <= {"finished", "never-admissible"}, summary["status"]
    assert summary["complete"] is True and summary["status"].get("finished", 0) == len(trace)

    # conservation: every job was finished by its nodes' pods, each running what its last admission was given
    # once (the whole duration, less what a preempted job kept from its last checkpoint); what they ran adds up to
    # that. Only kwok's and the watch's latency adds to it (a few wall seconds a pod, whatever the machine's load),
    # never the controllers' (that is `held`, below)
    asked = sum(r.accelerator_seconds for r in trace)
    assert summary["trace_accelerator_seconds"] == pytest.approx(asked)
    given = summary["given_accelerator_seconds"]
    assert given <= asked and (given == pytest.approx(asked) or summary["checkpoints"]["resumed_admissions"] > 0)
    nodes = {r.name: r.nodes for r in trace}
    assert {job: int(r["pods_ran"]) for job, r in rows.items()} == nodes
    overrun = summary["pod_overrun_wall_seconds"]
    assert overrun["min"] >= -0.5, f"a pod ended before its duration: {overrun}"  # kwok's delay is exact
    assert overrun["max"] < 10, f"a pod ran far beyond its duration: {overrun}"
    ran = summary["ran_accelerator_seconds"]
    assert ran >= given * 0.995, (ran, given)
    # the last admission held the quota at least while its pods ran; the rest is the controllers' latency
    held = summary["finished_accelerator_seconds"]
    assert held >= ran * 0.995, (held, ran, summary["overhead_wall_seconds"])
    # held counts preempted stretches too; what the jobs ran is what they held less the controllers' lag
    assert summary["admitted_accelerator_seconds"] >= held
    work = summary["accelerator_seconds"]
    assert work["ran"] >= (work["held"] - work["lag"]) * 0.999 and work["ran"] >= given - 1
    assert summary["utilisation"] <= 1 and summary["goodput_from_scratch"] <= summary["goodput"]

    # Kueue never let a ClusterQueue hold more than nominal + what it may borrow
    assert summary["cluster_queue_samples"] > 10
    assert summary["cluster_queue_over_limit"] == []
    # every admission was into the stack's only flavor, and the waits are Kueue's (not all zero: nlp's 16-node
    # job and vision's sweep overfill the 256 GPUs at t=0)
    assert {r["flavor"] for r in rows.values()} == {"h100-03d9b102"}
    assert max(float(r["admitted"]) - float(r["created"]) for r in rows.values()) > 0
    for plot in ("utilisation.png", "shares.png", "waits.png"):
        assert (tmp_path / "out" / plot).stat().st_size > 1000
    assert not list((tmp_path / "tmp").iterdir()), "simulate left its temporary folder behind"


def test_an_interrupted_run_reports_what_it_measured_and_leaves_nothing(tmp_path: Path) -> None:
    proc = simulate(tmp_path, "--trace", str(TRACE), "--compression", "5", "--max-wall", "600")
    assert proc.stderr is not None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "replaying" in line or not line:
            break
    time.sleep(10)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, f"{out}\n{err[-3000:]}"
    assert "interrupted" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["complete"] is False and "interrupted" in summary["stopped_early"]
    assert summary["status"].get("finished", 0) < 16
    assert processes_of(tmp_path) == [], "simulate left processes behind"
    assert not list((tmp_path / "tmp").iterdir()), "simulate left its temporary folder behind"
