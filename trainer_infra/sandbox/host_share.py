"""The host state every real node on this machine shares: the kernel settings the kubelet sets at start and the
folders containerd, libcni and the kubelet create at fixed places.

Two nodes may run at once (a developer's `make sandbox-up` beside an e2e session). A node that restored what it
saw at its own start would leave the host as the *other* node had set it, and one that removed the folders it saw
appear would pull them from under the other. So the first node to start records the host as it was, and the last
one to stop restores it. A record whose holders all died (a killed session) still holds the host's original state:
the next node keeps it, and restores it when it stops.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the record (``/run``: it goes with a reboot, as the kernel settings do)
RECORD = Path("/run/trainer-platform/node-host-state.json")


@dataclass(frozen=True)
class HostState:
    """Kernel settings (``/proc/sys`` key → value) and which of the fixed folders exist."""

    sysctls: dict[str, str]
    folders: tuple[str, ...]


def holder_name(workdir: Path) -> str:
    """A node's name in the record: the process that runs it (alive while the node is) and its work directory."""
    return f"{os.getpid()}:{workdir.resolve()}"


def join(holder: str, now: HostState) -> HostState:
    """Register ``holder``; the host's state before the first of the running nodes changed it (``now`` when none
    runs and none died holding it)."""
    with _record() as record:
        if "original" not in record:
            record["original"] = {"sysctls": now.sysctls, "folders": list(now.folders)}
        record["holders"] = sorted({*record["holders"], holder})
        return _state(record["original"])


def leave(holder: str) -> HostState | None:
    """Unregister ``holder``; the original state to restore when it was the last running node, else None."""
    with _record() as record:
        record["holders"] = [h for h in record["holders"] if h != holder]
        if record["holders"] or "original" not in record:
            return None
        return _state(record.pop("original"))


def others(holder: str) -> list[str]:
    """The other nodes running now (their state is theirs to restore)."""
    with _record() as record:
        return [h for h in record["holders"] if h != holder]


def _state(raw: dict[str, Any]) -> HostState:
    return HostState(sysctls=dict(raw["sysctls"]), folders=tuple(raw["folders"]))


def _alive(holder: str) -> bool:
    pid = int(holder.split(":", 1)[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _record() -> Iterator[dict[str, Any]]:
    """The record under an exclusive lock, holders that died dropped; written back (removed when empty)."""
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    with open(RECORD.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record: dict[str, Any] = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        record["holders"] = [h for h in record.get("holders", []) if _alive(h)]
        yield record
        if record["holders"] or "original" in record:
            RECORD.write_text(json.dumps(record, sort_keys=True))
        else:
            RECORD.unlink(missing_ok=True)
