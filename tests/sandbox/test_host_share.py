"""Two real nodes on one host: the host-wide kernel settings and folders come back as they were before the first,
whichever stops last, and a node whose session was killed does not keep them from coming back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainer_infra.sandbox import host_share
from trainer_infra.sandbox.host_share import HostState

ORIGINAL = HostState(sysctls={"vm/overcommit_memory": "0", "kernel/panic": "0"}, folders=("/etc/cni",))
#: what the kubelet sets (pkg/kubelet/cm: setupKernelTunables)
KUBELET = HostState(sysctls={"vm/overcommit_memory": "1", "kernel/panic": "10"}, folders=("/etc/cni", "/var/log/pods"))


@pytest.fixture(autouse=True)
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "run" / "state.json"
    monkeypatch.setattr(host_share, "RECORD", path)
    return path


def test_the_last_node_to_stop_restores_what_was_there_before_the_first(record: Path) -> None:
    first, second = host_share.holder_name(Path("/a")), host_share.holder_name(Path("/b"))
    assert host_share.join(first, ORIGINAL) == ORIGINAL
    # the second starts after the first's kubelet changed the host: it still learns the original
    assert host_share.join(second, KUBELET) == ORIGINAL
    assert host_share.others(second) == [first]
    assert host_share.leave(first) is None  # the second node still runs: nothing restored under it
    assert host_share.others(second) == []
    assert host_share.leave(second) == ORIGINAL
    assert not record.exists()


def test_a_killed_sessions_original_is_kept_for_the_next_node(record: Path) -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    killed = f"{child.pid}:/killed"
    host_share.join(killed, ORIGINAL)
    # the killed session never left; the next node finds the host as the kubelet set it
    mine = host_share.holder_name(Path("/next"))
    assert host_share.join(mine, KUBELET) == ORIGINAL
    assert host_share.others(mine) == []
    assert host_share.leave(mine) == ORIGINAL
