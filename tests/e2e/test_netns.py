"""The chart sandbox never makes private-range addresses local on the host's network."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e import netns


def test_host_network_is_refused() -> None:
    if netns.private():
        pytest.skip("already inside a private network namespace")
    with pytest.raises(netns.NetnsError, match="no device but loopback"):
        netns.make_local("10.251.90.0/24")


def test_wrapped_command_sees_only_its_loopback_and_can_use_it() -> None:
    probe = (
        "from tests.e2e import netns; import socket; netns.make_local('10.251.90.0/24');"
        "s = socket.create_server(('10.251.90.7', 0)); c = socket.create_connection(s.getsockname(), timeout=5);"
        "print(netns.devices(), c.getpeername()[0])"
    )
    proc = subprocess.run(netns.wrap([sys.executable, "-c", probe]), capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "unshare failed" in proc.stderr:
        pytest.skip(f"no network namespaces here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['lo']", "10.251.90.7"]
