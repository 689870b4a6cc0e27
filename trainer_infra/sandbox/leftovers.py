"""What a run left behind: processes that still belong to its work directory, ports still answering.

A process belongs to a work directory when its command line or environment names it, or its working or root
directory lies inside it: that covers the control plane (certificates and data there), the real node's containerd shims
(their state lies in it) and the Pulumi engine with its plugins (``PULUMI_HOME`` and the backend there), including a
plugin the engine orphaned, which is no longer a child of the test.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _names(pid: int, work: str) -> bool:
    for part in ("cmdline", "environ"):
        try:
            if work.encode() in Path(f"/proc/{pid}/{part}").read_bytes():
                return True
        except OSError:
            continue
    for link in ("cwd", "root"):
        try:
            target = os.readlink(f"/proc/{pid}/{link}")
        except OSError:
            continue
        if target == work or target.startswith(work + "/"):
            return True
    return False


def processes_of(work: Path) -> list[str]:
    """``pid: command line`` of every process other than this one (and its parents) that belongs to ``work``."""
    path = str(work.resolve())
    mine = {os.getpid(), os.getppid()}
    found = []
    for pid in pids():
        if pid in mine or not _names(pid, path):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        found.append(f"{pid}: {cmdline.strip()[:200]}")
    return found


def answering(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, port)) == 0
