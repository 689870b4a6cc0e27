"""The session of the real-node scenarios (issue #28 item 3, ``make e2e-sandbox``): the platform exactly as
``make sandbox-up`` installs it (the real ``pulumi up`` of the sandbox stack onto a real, untainted node; the charts'
controllers as pods with the charts' RBAC and the product's Helm values), used the way a newcomer and a team member
use it, through ``sandbox.json``.

``platform_sandbox`` (session fixture) runs ``trainer-infra sandbox up`` once; the files of the
session (``run.SANDBOX_TESTS``: test_sandbox_up, the training, NetworkPolicy and runtime scenarios) act as the
members whose kubeconfigs sandbox.json names, and as the admin only where a cluster admin would (reading status, a
probe namespace of their own). At the session's end ``make sandbox-down`` must leave nothing (an error at the last
test's teardown names it). What lives only inside the sandbox's network and mount namespaces (the node's containerd,
its iptables rules and conntrack table, the node's address) is reached with ``nsenter`` into the daemon's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer_infra.sandbox import leftovers
from trainer_infra.sandbox.interrupts import wait_to_end
from trainer_infra.sandbox.kube import KubeClient
from trainer_infra.sandbox.versions import CHECKOUT

Obj = dict[str, Any]
#: the marks of the session's files: opt-in, as root (the daemon's namespaces, containerd, mounts, cgroups)
SANDBOX_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_SANDBOX") != "1", reason="opt-in: E2E_SANDBOX=1 (make e2e-sandbox)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's real node needs root"),
]


def run_module(module: str, *args: str, timeout: float = 2400) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python -m <module> <args>`` from the checkout, as a person runs it; its output is printed."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", module, *args]
    child = subprocess.Popen(cmd, cwd=CHECKOUT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # on Ctrl-C `up` stops its daemon: waited for, not killed
    out, err = wait_to_end(child, timeout)
    proc = subprocess.CompletedProcess(cmd, child.returncode, out, err)
    print(f"\n$ {module} {' '.join(args)} ({time.monotonic() - start:.0f} s)\n{proc.stdout}{proc.stderr}", flush=True)
    return proc, round(time.monotonic() - start, 1)


def client_from(kubeconfig: str | Path) -> KubeClient:
    """A client from a kubeconfig file as sandbox.json names it (client certificate, the sandbox's CA)."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    files = (cluster["certificate-authority"], user["client-certificate"], user["client-key"])
    ca, cert, key = (Path(p) for p in files)
    return KubeClient(cluster["server"], ca, cert, key)


@dataclass(frozen=True)
class Member:
    """A team member as sandbox.json names them."""

    user: str
    groups: tuple[str, ...]
    team: str
    namespace: str
    queue: str
    kubeconfig: str

    def client(self) -> KubeClient:
        return client_from(self.kubeconfig)


@dataclass
class RunningSandbox:
    """A sandbox of ``make sandbox-up``: its state directory, ``sandbox.json`` and the daemon holding it."""

    state: Path
    doc: Obj
    pid: int
    times: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.admin = client_from(self.doc["adminKubeconfig"])

    @property
    def node(self) -> str:
        return str(self.doc["node"])

    @property
    def members(self) -> list[Member]:
        return [
            Member(m["user"], tuple(m["groups"]), m["team"], m["namespace"], m["queue"], m["kubeconfig"])
            for m in self.doc["members"]
        ]

    def member(self, team_index: int) -> Member:
        """The first member of the ``team_index``-th team (0: the ``restricted`` one)."""
        teams = list(dict.fromkeys(m.team for m in self.members))
        return next(m for m in self.members if m.team == teams[team_index])

    def host_directory(self, namespace: str, claim: str = "workspace") -> Path:
        """The host directory behind a team claim (the export the kubelet mounts)."""
        return Path(
            next(c for c in self.doc["claims"] if (c["namespace"], c["claim"]) == (namespace, claim))["hostDirectory"]
        )

    def token_client(self, token: str) -> KubeClient:
        """A client holding only ``token`` (a ServiceAccount's, as a pod holds it): the sandbox's CA, no
        certificate."""
        doc = yaml.safe_load(Path(self.doc["adminKubeconfig"]).read_text())
        return KubeClient(
            self.doc["server"], Path(doc["clusters"][0]["cluster"]["certificate-authority"]), None, None, bearer=token
        )

    def inside(self, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``cmd`` in the sandbox's network and mount namespaces (the daemon's): the node's address, its rules."""
        full = ["nsenter", f"--target={self.pid}", "--net", "--mount", *cmd]
        return subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)

    def ctr(self, *args: str) -> subprocess.CompletedProcess[str]:
        """containerd's own CLI against the node's containerd (sandbox.json ``containerd``)."""
        where = self.doc["containerd"]
        return self.inside("ctr", "--address", where["address"], "--namespace", where["namespace"], *args)

    def assert_ran_from_mirror(self, pod: Obj) -> None:
        """Every container of ``pod`` ran a runtime stand-in the sandbox published: the kubelet's ``imageID`` is
        the mirror's repository at the digest published there (sandbox.json ``runtimeImages``)."""
        published = self.doc["runtimeImages"]
        for status in pod["status"].get("initContainerStatuses", []) + pod["status"]["containerStatuses"]:
            assert status["image"] in published, (status["image"], sorted(published))
            repository = status["image"].rsplit(":", 1)[0]
            assert status["imageID"] == f"{repository}@{published[status['image']]}", status


def attach(state: Path) -> RunningSandbox:
    """A sandbox that already runs (``make sandbox-up``; its state directory)."""
    status = json.loads((state / "status.json").read_text())
    if status.get("state") != "ready":
        raise AssertionError(f"the sandbox in {state} is not ready: {status}")
    return RunningSandbox(state, json.loads((state / "sandbox.json").read_text()), status["pid"])


@pytest.fixture(scope="session")
def platform_sandbox() -> Iterator[RunningSandbox]:
    """``make sandbox-up`` in a short state directory (the node's containerd sockets live under it, and pytest's
    ``tmp_path`` can be longer than containerd accepts: ``node_host.SOCKET_PATH_MAX``); at the end ``make
    sandbox-down``, which must leave no process, listener or mount (checked again from here).

    ``E2E_SANDBOX_DIR=<state directory>``: the scenarios on a sandbox that already runs (a developer's
    ``make sandbox-up``), left running."""
    if os.environ.get("E2E_SANDBOX_DIR"):
        yield attach(Path(os.environ["E2E_SANDBOX_DIR"]))
        return
    top = Path(tempfile.mkdtemp(prefix="sbx-"))
    state = top / "state"
    up, up_s = run_module("trainer_infra", "sandbox", "up", "--dir", str(state))
    doc: Obj = {}
    running: RunningSandbox | None = None
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert str(state / "sandbox.json") in up.stdout
        doc = json.loads((state / "sandbox.json").read_text())
        status = json.loads((state / "status.json").read_text())
        print(f"[sandbox] up took {up_s} s; status {status}", flush=True)
        running = RunningSandbox(state, doc, status["pid"], {"make sandbox-up": up_s})
        yield running
    finally:
        down, down_s = run_module("trainer_infra", "sandbox", "down", "--dir", str(state))
        times = running.times if running else {}
        print(f"[sandbox] times: {json.dumps({**times, 'make sandbox-down': down_s})}", flush=True)
    try:
        assert down.returncode == 0, down.stderr[-3000:]
        assert "nothing left" in down.stdout
        # checked again from here: no process of the state directory, the API server's port closed, no mount
        assert not leftovers.processes_of(state), leftovers.processes_of(state)
        if doc:
            host, _, port = doc["server"].removeprefix("https://").rpartition(":")
            assert not leftovers.answering(host, int(port))
        assert str(state) not in Path("/proc/self/mountinfo").read_text()
    finally:
        shutil.rmtree(top, ignore_errors=True)
