"""The sessions that start a real node run in a network namespace with nothing but its loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainer_infra.sandbox import netns


def test_wrapped_command_sees_only_its_loopback_and_can_use_it() -> None:
    probe = (
        "from trainer_infra.sandbox import netns; import socket;"
        "s = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection(s.getsockname(), timeout=5);"
        "print(netns.devices(), netns.private(), c.getpeername()[0])"
    )
    proc = subprocess.run(netns.wrap([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "unshare failed" in proc.stderr:
        pytest.skip(f"no network namespaces here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['lo']", "True", "127.0.0.1"]
