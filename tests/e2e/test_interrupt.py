"""Ctrl-C during `make e2e`'s install session leaves nothing (root; 6.6 min measured; not in `make e2e`'s sessions).

The session runs as `make e2e` starts it (``python -m tests.e2e.run``: pytest inside ``unshare --net --mount``), in a
process group of its own that gets the SIGINT a terminal sends on Ctrl-C, at the moment that once left everything
running: the first ``pulumi up`` with its plugins (language host, Kubernetes provider, policy analyzer), the charts'
controller pods starting on the real node with their CNI network namespaces, the control plane and the mirror
serving. Afterwards nothing of it is left: no process naming its work directory (control plane, kubelet,
containerd and its shims, the pods, the engine and its plugins), no new network namespace in ``/var/run/netns``,
no mount under the work directory, no cgroup, CNI cache entry or shim socket of its node. The cheap half (no
control plane) is test_interrupts_parts.py.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from trainer_infra.sandbox import leftovers
from trainer_infra.sandbox.kube import FatalWaitError, wait_for
from trainer_infra.sandbox.node_host import CGROUP_FS, CNI_CACHE, NETNS_DIR, SHIM_SOCKETS
from trainer_infra.sandbox.versions import CHECKOUT

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="the install session's real node needs root"),
]
#: the plugins of a `pulumi up` with the policy pack (sandbox/pulumi_stack.py): what the engine orphaned when killed
PLUGINS = ("pulumi-language-python", "pulumi-resource-kubernetes", "pulumi-analyzer-policy")


def host_state() -> dict[str, set[str]]:
    """What a real node leaves on the host's file systems when it is not stopped (the rest lives in the session's
    own network and mount namespaces, and ends with its last process)."""

    def listing(folder: Path, pattern: str = "*") -> set[str]:
        return {str(p) for p in folder.glob(pattern)} if folder.is_dir() else set()

    return {
        "network namespaces": listing(NETNS_DIR),
        "node cgroups": {str(p) for p in CGROUP_FS.glob("*/trainer-platform-e2e-*")},
        "CNI cache": listing(CNI_CACHE),
        "shim sockets": listing(SHIM_SOCKETS),
    }


def mounted_anywhere(path: str) -> bool:
    for info in Path("/proc").glob("[0-9]*/mountinfo"):
        with contextlib.suppress(OSError):
            if path in info.read_text():
                return True
    return False


def running(work: Path) -> dict[str, list[str]]:
    """The session's processes by kind: the `pulumi up` CLI, its plugins."""
    found: dict[str, list[str]] = {"up": [], "plugins": []}
    for line in leftovers.processes_of(work):
        if re.search(r"/pulumi up --yes --skip-preview", line):
            found["up"].append(line)
        elif any(plugin in line for plugin in PLUGINS):
            found["plugins"].append(line)
    return found


def test_ctrl_c_during_the_first_pulumi_up_leaves_nothing(tmp_path: Path) -> None:
    top = Path(tempfile.mkdtemp(prefix="ctrlc-"))  # short: containerd's socket path limit (node_host.SOCKET_PATH_MAX)
    work = top / "session"
    before = host_state()
    log_path = tmp_path / "session.log"
    session = ["-m", "e2e", "-s", f"--basetemp={work}", "tests/e2e/test_pulumi_install.py"]
    cmd = [sys.executable, "-m", "tests.e2e.run", *session]
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=CHECKOUT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the terminal's, for the SIGINT below
            # a shell starts background commands with SIGINT ignored, which Python keeps: as at a terminal
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    left: dict[str, list[str]] = {}
    began = time.monotonic()
    try:

        def the_moment() -> dict[str, object] | None:
            if proc.poll() is not None:
                raise FatalWaitError(f"the session exited {proc.returncode} first:\n{log_tail(log_path)}")
            now = running(work)
            pods = sorted(host_state()["network namespaces"] - before["network namespaces"])
            # CoreDNS's pod is there before the up; a second one is a chart controller's
            if now["up"] and len(now["plugins"]) >= 2 and len(pods) >= 2:
                return {**now, "pod network namespaces": pods}
            return None

        seen = wait_for("`pulumi up` with its plugins, and chart pods on the real node", the_moment, 1800, 2)
        print(f"[ctrl-c] after {time.monotonic() - began:.0f} s, at: {seen}", flush=True)
        os.killpg(proc.pid, signal.SIGINT)
        interrupted = time.monotonic()
        proc.wait(timeout=900)
        stopped = time.monotonic() - interrupted
        print(f"[ctrl-c] the run exited {proc.returncode} {stopped:.0f} s after Ctrl-C", flush=True)
        left = what_is_left(work, before)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        remove(left or what_is_left(work, before), before)
        shutil.rmtree(top, ignore_errors=True)
    out = log_tail(log_path)
    print(f"[ctrl-c] the session's last lines:\n{out[-3000:]}", flush=True)  # its log goes with pytest's tmp_path
    assert proc.returncode == 130, f"exit {proc.returncode}:\n{out}"
    # the engine was cancelled by the test (pulumi_stack.cancel), and run.py waited for the session's teardown
    assert re.search(r"\[e2e\] pulumi \(pid \d+\) interrupted", out), out
    assert "[e2e] interrupted after" in out, out
    assert not any(left.values()), f"left behind after Ctrl-C: {left}\n{out}"


def what_is_left(work: Path, before: dict[str, set[str]]) -> dict[str, list[str]]:
    deadline = time.monotonic() + 15  # a process just killed may take a moment to leave /proc
    while (processes := leftovers.processes_of(work)) and time.monotonic() < deadline:
        time.sleep(0.5)
    now = host_state()
    left = {what: sorted(now[what] - before[what]) for what in now}
    left["processes"] = processes
    left["mounts"] = [
        line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(work) in line
    ]
    return left


def remove(left: dict[str, list[str]], before: dict[str, set[str]]) -> None:
    """So that a failing run does not leave this machine dirty: kill what runs, then remove the files nothing
    mounts or uses any more (never anything that was there before the run)."""
    for line in left.get("processes", []):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
    time.sleep(2)
    for what in ("network namespaces", "CNI cache", "shim sockets"):
        for path in left.get(what, []):
            if path not in before[what] and not mounted_anywhere(path):
                Path(path).unlink(missing_ok=True)
    for path in sorted(left.get("node cgroups", []), key=len, reverse=True):
        for sub in sorted((p for p in Path(path).rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            Path(path).rmdir()


def log_tail(path: Path, size: int = 6000) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return text[-size:]
