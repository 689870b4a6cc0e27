"""A private network namespace for the sessions that start a real node (the real install path, the node's own).

The node's bridge, veths, iptables chains, ipsets and the API server's listener on the node's address must never
touch the host's network: the whole pytest session is started in a network namespace of its own (``unshare
--net``, root only; with ``--mount``, a mount namespace too), with nothing in it but its loopback device.
Nothing the session starts can reach, or be reached from, any other network; that also proves the install is
air-gapped (charts and images from the local mirror, no plugin downloads).
"""

from __future__ import annotations

from pathlib import Path


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
