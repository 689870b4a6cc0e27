"""``make e2e`` without named files: the builds and the sessions in two lanes, so that a core never waits for a part
that does not need it.

A cold 2-core machine spent a third of CI's time with a core idle: the sessions mostly wait (for a controller, for
``waitForPodsReady``), the builds mostly compute, and each waited for the other. Here:

- the **harness lane** builds the control plane's binaries, then runs the harness session (``HARNESS_TESTS``: control
  planes of their own in this network namespace, on free ports, in pytest's own temporary folders), then builds the
  test tools no cluster session needs (``TOOLS``, once the real node's binaries are built) and runs their session;
- the **platform lane** builds the Pulumi toolchain meanwhile (its own cache folder and log; Go's caches are safe to
  share), then the real node's binaries (after the control plane's: one ``Builder`` at a time, its lock), then runs
  the node session while the toolchain may still build, then the install session, then the sandbox session (once
  the runtime stand-in images, built from the start at a lower priority, are there).

Two real nodes run at once (``host_share.py`` hands the host-wide state from the first node to start to the last to
stop). ``E2E_SANDBOX_BESIDE_INSTALL=1`` runs the sandbox session beside the install session (tests/e2e/README.md,
"Cold, 2026-11-28"). The harness session starts no node and runs no
Pulumi, so it overlaps any of them. Every part's output is prefixed with its name; the end prints each part's start,
duration and result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import IO

from trainer_infra.sandbox import netns, runtime_images
from trainer_infra.sandbox.build import Builder, BuildError
from trainer_infra.sandbox.interrupts import wait_to_end
from trainer_infra.sandbox.node_host import NodeError
from trainer_infra.sandbox.toolchain import Toolchain
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet

#: the stand-in images' niceness (``make test`` runs at 10 beside the builds too)
IMAGES_NICE = 10
#: the exit code of a run stopped by Ctrl-C (a shell's 128 + SIGINT)
INTERRUPTED = 130
#: the test tools no cluster session needs (``Plan.tools``'s files do): built after the real node's binaries, off
#: the way to the install session (promtool: ≈ 3 min of a cold build)
TOOLS = ("promtool",)


@dataclass(frozen=True)
class Plan:
    """What this run does: each session's pytest files (empty: not run) and the common pytest arguments."""

    installed: tuple[str, ...]
    harness: tuple[str, ...]
    node: tuple[str, ...]
    sandbox: tuple[str, ...]
    pytest_args: tuple[str, ...]
    env: dict[str, str]
    #: the files that need only the test tools (``TOOLS``), no cluster
    tools: tuple[str, ...] = ()


@dataclass
class Part:
    """One timed part of the run, for the closing table."""

    name: str
    began: float
    took: float = 0.0
    result: str = "running"


@dataclass
class Pipeline:
    """Runs a ``Plan`` in two lanes; see the module's docstring."""

    plan: Plan
    versions: VersionSet
    #: extra build steps before the install session (name → seconds it took; empty when cached)
    before_install: Callable[[], dict[str, float]] = dict
    start: float = field(default_factory=time.monotonic)
    parts: list[Part] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    interrupted: bool = False
    terminated: bool = False
    controlplane_built: bool = False
    running: set[subprocess.Popen[bytes]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    codes: list[int] = field(default_factory=list)

    # -- parts -------------------------------------------------------------
    def timed(self, name: str, work: Callable[[], object]) -> bool:
        """Run one part unless the run is stopping; record its time and result; whether it succeeded."""
        if self.stopping.is_set():
            return False
        part = Part(name, time.monotonic())
        with self.lock:
            self.parts.append(part)
        print(f"[e2e] {name} ...", flush=True)
        try:
            outcome = work()
        except (BuildError, NodeError, runtime_images.StandInError) as exc:
            part.result = "failed"
            print(f"[e2e] {name} failed: {exc}", file=sys.stderr, flush=True)
            self.codes.append(1)
            return False
        except BaseException:
            part.result = "stopped"
            raise
        finally:
            part.took = time.monotonic() - part.began
        if isinstance(outcome, int) and outcome != 0:
            part.result = f"exit {outcome}"
            self.codes.append(outcome)
            return False
        part.result = "ok" if not isinstance(outcome, dict) or outcome else "ok (cached)"
        if isinstance(outcome, dict) and outcome:
            print(f"[e2e] {name}: built {outcome} in {part.took:.0f} s", flush=True)
        return True

    def session(self, name: str, files: tuple[str, ...], *, in_netns: bool) -> int:
        """One pytest session, its output prefixed with ``[name]``; its exit code."""
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *self.plan.pytest_args, *files]
        if in_netns:
            # the real node's bridge, rules and mounts (the chart sandbox's too) stay in the session
            cmd = netns.wrap(cmd, mount=True)
        # a pipe of our own, not stdout=PIPE: wait_to_end's communicate() would read a PIPE itself
        read_end, write_end = os.pipe()
        with os.fdopen(read_end, errors="replace") as output:
            try:
                proc = subprocess.Popen(cmd, cwd=CHECKOUT, env=self.plan.env, stdout=write_end, stderr=write_end)
            finally:
                os.close(write_end)
            with self.lock:
                self.running.add(proc)
            printer = threading.Thread(target=prefix, args=(name, output), daemon=True)
            printer.start()
            try:
                wait_to_end(proc)
            finally:
                with self.lock:
                    self.running.discard(proc)
                # the pipe ends once everything the session started has closed it; a process it left behind (its
                # teardown names it) must not hold the run
                printer.join(timeout=30)
        return proc.returncode

    # -- lanes -------------------------------------------------------------
    def harness_lane(self, built: threading.Event, node_built: threading.Event) -> None:
        """The control plane's binaries, then the harness session; then the test tools (after the real node's
        binaries: one ``Builder`` at a time, and those are on the way to the install session) and their session."""
        try:
            self.controlplane_built = self.timed("build: control plane", self.build_controlplane)
        finally:
            built.set()
        if not self.controlplane_built:
            return
        if self.plan.harness:
            self.timed("session: harness", lambda: self.session("harness", self.plan.harness, in_netns=False))
        if self.plan.tools:
            node_built.wait()
            if self.timed("build: test tools", self.build_tools):
                self.timed("session: tools", lambda: self.session("tools", self.plan.tools, in_netns=False))

    def platform_lane(self, built: threading.Event, node_built: threading.Event) -> None:
        """The toolchain and the images beside the control plane's build, the node's binaries, the node session, then
        the install and sandbox sessions (side by side with ``E2E_SANDBOX_BESIDE_INSTALL=1``)."""
        toolchain = Lane(self, "toolchain", self.toolchain) if self.plan.installed or self.plan.sandbox else None
        # from the start, at a lower priority: they need no Go binary, and after the real node's build they came
        # before the sandbox session on a cold run's critical path (1,105 s, 2026-11-28)
        images = Lane(self, "stand-in images", self.stand_in_images) if self.plan.sandbox else None
        sandbox: Lane | None = None
        try:
            built.wait()
            # after the control plane's build (``Builder`` holds a lock): what it failed to build is not tried twice
            node_ok = self.controlplane_built and self.timed("build: real node", self.build_node)
            node_built.set()
            if not node_ok:
                return
            if self.plan.node:
                self.timed("session: node", lambda: self.session("node", self.plan.node, in_netns=True))
            toolchain_ok = toolchain is None or toolchain.join()
            # beside the install session with E2E_SANDBOX_BESIDE_INSTALL=1: the two sessions mostly wait, and in
            # sequence they are most of a cold run's critical path. Not yet the default: its one run (cold, 2026-11-28)
            # passed every test of both, then the sandbox's down failed on EBUSY (node.py _restore_host, fixed since,
            # not run again)
            after_install = os.environ.get("E2E_SANDBOX_BESIDE_INSTALL") != "1"
            if self.plan.sandbox and toolchain_ok and not after_install:
                sandbox = Lane(self, "sandbox", lambda: self.sandbox(images))
            if self.plan.installed and toolchain_ok and self.timed("build: before install", self.before_install):
                self.timed("session: install", lambda: self.session("install", self.plan.installed, in_netns=True))
            if self.plan.sandbox and toolchain_ok and after_install:
                sandbox = Lane(self, "sandbox", lambda: self.sandbox(images))
            if sandbox is not None:
                sandbox.join()
        finally:
            node_built.set()
            # a background part still running (a failure above) is waited for: no go build outlives the run
            for background in (toolchain, images, sandbox):
                if background is not None:
                    background.join()

    def sandbox(self, images: Lane | None) -> bool:
        if images is not None and not images.join():
            return False
        return self.timed("session: sandbox", lambda: self.session("sandbox", self.plan.sandbox, in_netns=False))

    def toolchain(self) -> bool:
        return self.timed("build: Pulumi toolchain", self.build_toolchain)

    def stand_in_images(self) -> bool:
        # this thread's nice value (Linux keeps one per thread), which the processes it starts inherit: the builds
        # on the way to every session come first, the images take what CPU they leave
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), IMAGES_NICE)
        return self.timed("build: stand-in images", self.build_images)

    # -- the builds (each: name → seconds, empty when cached) ----------------
    def build_controlplane(self) -> dict[str, float]:
        """The control plane's and the controllers' binaries, chart-render, promql-names (what the harness and the
        install sessions run), not ``TOOLS``."""
        builder = Builder(self.versions)
        return builder.build(only=controlplane_targets(builder))

    def build_node(self) -> dict[str, float]:
        """The real node's binaries (kubelet, pause, kube-proxy, CoreDNS, kube-router)."""
        builder = Builder(self.versions)
        return builder.build(only={t.name for t in builder.targets() if t.node})

    def build_tools(self) -> dict[str, float]:
        """The test tools only ``Plan.tools``'s files run (``TOOLS``)."""
        return Builder(self.versions).build(only=set(TOOLS))

    def build_toolchain(self) -> dict[str, float]:
        """The Pulumi CLI, language host, Kubernetes provider and SDK venv (install and sandbox sessions)."""
        return Toolchain().build()

    def build_images(self) -> dict[str, float]:
        """The runtime stand-in images (the sandbox serves every one built); they need the Debian archive, so they
        are built here, outside any session's network namespace."""
        built: dict[str, float] = {}
        for stand_in in runtime_images.STAND_INS:
            began = time.monotonic()
            if runtime_images.build(stand_in):
                built[f"{stand_in.name} stand-in image"] = round(time.monotonic() - began, 1)
        return built

    # -- the run -----------------------------------------------------------
    def run(self) -> int:
        """Both lanes to their end; the highest exit code, or ``INTERRUPTED``."""
        built, node_built = threading.Event(), threading.Event()
        lanes = [Lane(self, "harness", lambda: self.harness_lane(built, node_built))]
        if self.plan.installed or self.plan.node or self.plan.sandbox:
            lanes.append(Lane(self, "platform", lambda: self.platform_lane(built, node_built)))
        else:
            node_built.set()
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, self.pass_on) if main else None
        try:
            for lane in lanes:
                while not lane.done.wait(0.5):
                    pass
        except KeyboardInterrupt:
            # every session and build got the terminal's SIGINT too and stops what it started: wait for that
            self.interrupted = True
            self.stopping.set()
            print("[e2e] interrupted: waiting for the running parts to stop what they started", flush=True)
            for lane in lanes:
                lane.done.wait()
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self.report()
        if self.terminated:
            # as run_sessions: the run ends by the SIGTERM (its handler before) once everything it started stopped
            signal.raise_signal(signal.SIGTERM)
        if self.interrupted:
            print(f"[e2e] interrupted after {time.monotonic() - self.start:.0f} s; no later part run", flush=True)
            return INTERRUPTED
        return max(self.codes, default=0)

    def pass_on(self, signum: int, frame: FrameType | None) -> None:
        """A SIGTERM (a CI runner's stop) goes to every running session, which stops as on Ctrl-C; nothing new
        starts."""
        self.interrupted = self.terminated = True
        self.stopping.set()
        with self.lock:
            for proc in self.running:
                proc.send_signal(signum)

    def report(self) -> None:
        """Each part's start (from the run's start), duration and result, and the run's wall time."""
        print("[e2e] part                          start     took  result", flush=True)
        for part in sorted(self.parts, key=lambda p: p.began):
            print(
                f"[e2e] {part.name:<28} {part.began - self.start:>6.0f} s {part.took:>6.0f} s  {part.result}",
                flush=True,
            )
        print(f"[e2e] all parts: {time.monotonic() - self.start:.0f} s wall", flush=True)


class Lane:
    """A thread running one lane (or one background part of a lane); ``join`` gives whether it succeeded."""

    def __init__(self, pipeline: Pipeline, name: str, work: Callable[[], object]) -> None:
        self.ok = False
        self.done = threading.Event()
        self.pipeline = pipeline

        def body() -> None:
            try:
                self.ok = work() is not False
            except BaseException as exc:  # a lane's bug must not hang the run: report and stop
                print(f"[e2e] {name} lane stopped by {exc!r}", file=sys.stderr, flush=True)
                pipeline.codes.append(1)
                pipeline.stopping.set()
            finally:
                self.done.set()

        threading.Thread(target=body, name=name, daemon=True).start()

    def join(self) -> bool:
        self.done.wait()
        return self.ok


def controlplane_targets(builder: Builder) -> set[str]:
    """What "build: control plane" builds: not the real node's, not ``TOOLS``, and no opt-in target (Karpenter's,
    230 s and a Go toolchain of its own in a cold run, is only for the opt-in test that runs it)."""
    return {t.name for t in builder.targets() if not t.node and not t.opt_in and t.name not in TOOLS}


def prefix(name: str, stream: IO[str] | None, out: IO[str] | None = None) -> None:
    """Copy a session's output line by line, each line prefixed with ``[name]`` (two sessions may run at once)."""
    target = out or sys.stdout
    for line in stream if stream is not None else ():
        target.write(f"[{name}] {line}" if line.endswith("\n") else f"[{name}] {line}\n")
        target.flush()
