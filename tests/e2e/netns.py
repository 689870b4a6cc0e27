"""A private network namespace for the real-install e2e.

kwok gives the charts' controller Pods IPs from a node's podCIDR, and EndpointSlices refuse loopback
addresses, so those Pods need addresses outside 127.0.0.0/8 that are still local. Traffic to such addresses
must never leave this machine's sandbox: the whole pytest session that runs ``test_pulumi.py`` is started in a
network namespace of its own (``unshare --net``, root only), with nothing in it but its loopback device, and
the podCIDR is made local there. Nothing the session starts can reach, or be reached from, any other network;
that also proves the install is air-gapped (charts from the local mirror, no plugin downloads).
"""

from __future__ import annotations

import subprocess
from pathlib import Path


class NetnsError(RuntimeError):
    """The private network namespace is missing or could not be set up."""


def devices() -> list[str]:
    """The network devices of this process's namespace (``/proc/self/net/dev`` follows the namespace)."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines if ":" in line)


def private() -> bool:
    """Whether this process's network namespace has nothing but its loopback (so nothing leaves it)."""
    return devices() == ["lo"]


def wrap(cmd: list[str], *, mount: bool = False) -> list[str]:
    """``cmd`` run in a new network namespace whose only device is its loopback, up (dies with the child).

    ``mount``: in a private mount namespace too (the real node's overlay, tmpfs and network-namespace mounts are
    then never seen by the host, even if a teardown fails)."""
    spaces = ["--net", "--mount", "--propagation", "private"] if mount else ["--net"]
    return ["unshare", *spaces, "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *cmd]


def make_local(cidr: str) -> None:
    """Every address of ``cidr`` local; refuses to touch the host's network."""
    if not private():
        raise NetnsError(
            f"the chart sandbox needs {cidr} local, which is only done in a network namespace with no device but "
            f"loopback (found {devices()}): "
            "run it through `E2E_PULUMI=1 python -m tests.e2e.run` (it starts the session with `unshare --net`)"
        )
    cmd = ["ip", "route", "replace", "local", cidr, "dev", "lo", "table", "local"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise NetnsError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()}")
