"""Supervise the sandbox's processes: free ports, start a binary in its own session, wait on it with its log
tail in the error, stop it (SIGTERM, then SIGKILL) and never kill a PID that was reused."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_infra.sandbox.kube import FatalWaitError, wait_for

#: seconds each start step may take before the sandbox gives up naming it (``SANDBOX_TIMEOUT``)
TIMEOUT = float(os.environ.get("SANDBOX_TIMEOUT", "90"))


class SandboxError(RuntimeError):
    """A sandbox step failed; the message names the process, its version and its log tail."""


def ephemeral_port_range(proc_file: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> tuple[int, int]:
    """The kernel's range for port-0 binds and outgoing connections (Linux default if unreadable)."""
    try:
        low, high = (int(x) for x in proc_file.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def port_window(ephemeral: tuple[int, int]) -> range:
    """The widest stretch of unprivileged ports the kernel never hands out on its own."""
    low, high = ephemeral
    below, above = range(max(1024, min(low, 10000)), low), range(high + 1, 65536)
    return max(below, above, key=len)


_handed_out: set[int] = set()
_port_lock = threading.Lock()


def free_port() -> int:
    """A free TCP port on 127.0.0.1 that stays free until the process we configure with it binds it.

    A port-0 probe returns an ephemeral port, and before the controller binds it the kernel may give the same
    port to an outgoing connection (kube-apiserver → etcd) or to another port-0 listener: the controller then
    dies with "address already in use" and takes the whole session down (seen on a cold CI run). Ports
    outside the ephemeral range are only taken by explicit binds; each is handed out once per test process,
    and a random pick keeps two sessions on one machine apart.
    """
    window = port_window(ephemeral_port_range())
    pick = random.SystemRandom()
    with _port_lock:
        for _ in range(200):
            port = pick.choice(window)
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _handed_out.add(port)
            return port
    raise SandboxError(f"no free TCP port on 127.0.0.1 in {window.start}-{window.stop - 1} after 200 tries")


def log_tail(path: Path, lines: int = 30) -> str:
    """Last lines of a log file (for error messages)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Process:
    """One running binary of the sandbox."""

    name: str
    version: str
    binary: Path
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    pid: int = 0

    def alive(self) -> bool:
        """True while the process runs (works for detached processes too)."""
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_matches(self.pid, self.binary)

    def describe_failure(self, what: str) -> str:
        """Message naming the binary, its version and the tail of its log."""
        code = self.popen.poll() if self.popen is not None else None
        state = f"exited with code {code}" if code is not None else "is running"
        return (
            f"{what}: {self.name} (v{self.version}, {self.binary}) {state}; "
            f"last lines of {self.log}:\n{log_tail(self.log)}"
        )


def spawn(
    name: str, version: str, binary: Path, args: list[str], log: Path, cwd: Path, env: dict[str, str] | None = None
) -> Process:
    """Start ``binary`` in its own session (Ctrl-C in a terminal does not reach it before we stop it in order),
    appending its output to ``log``."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("GOFLAGS", None)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        popen = subprocess.Popen(
            [str(binary), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
    return Process(name, version, binary, log, popen, popen.pid)


def wait_process(
    proc: Process, what: str, check: Any, timeout: float = TIMEOUT, error: type[SandboxError] = SandboxError
) -> Any:
    """Wait for ``check``; fail fast with the log tail if the process died meanwhile."""

    def guarded() -> Any:
        if not proc.alive():
            raise _ProcessDiedError(proc.describe_failure(f"{what} never happened"))
        return check()

    try:
        return wait_for(f"{what} ({proc.name} v{proc.version})", guarded, timeout)
    except _ProcessDiedError as died:
        raise error(str(died)) from None
    except TimeoutError as exc:
        raise error(f"{exc}\n{proc.describe_failure('still waiting')}") from None


def pid_matches(pid: int, binary: Path) -> bool:
    """Whether ``pid`` is still our binary (guards against PID reuse before a kill)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    return exe.removesuffix(" (deleted)") == str(binary)


def exit_on_sigterm() -> None:
    """Turn SIGTERM (CI timeout, ``kill``) into SystemExit so atexit stops our processes.

    The children run in their own sessions (so Ctrl-C in a terminal does not hit them before
    we stop them in order); without this a SIGTERM would leave them running.
    """
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
        signal.SIG_DFL,
        None,
    ):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class _ProcessDiedError(FatalWaitError):
    pass


def terminate(proc: Process, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL after ``grace`` seconds."""
    if not proc.alive():
        if proc.popen is not None:
            proc.popen.wait(timeout=1)
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.popen is not None:
            if proc.popen.poll() is not None:
                return
        elif not pid_matches(proc.pid, proc.binary):
            return
        time.sleep(0.1)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if proc.popen is not None:
        proc.popen.wait(timeout=5)


@dataclass
class Endpoints:
    """Ports chosen for this sandbox."""

    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)
    kwok: int = field(default_factory=free_port)
    jobset_webhook: int = field(default_factory=free_port)
    jobset_health: int = field(default_factory=free_port)
    kueue_webhook: int = field(default_factory=free_port)
    kueue_health: int = field(default_factory=free_port)
    trainer_webhook: int = field(default_factory=free_port)
    trainer_health: int = field(default_factory=free_port)
    lws_webhook: int = field(default_factory=free_port)
    lws_health: int = field(default_factory=free_port)
    jobset_metrics: int = field(default_factory=free_port)
    kueue_metrics: int = field(default_factory=free_port)
    trainer_metrics: int = field(default_factory=free_port)
