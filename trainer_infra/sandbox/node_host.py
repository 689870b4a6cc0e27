"""What a real node needs of the host and what it changes there: the Debian packages, cgroup hierarchies and
privileges it needs (``preflight``), and the host state it touches (mounts, iptables rules, containerd's shim sockets,
fixed folders, kernel settings), read before it starts and compared after it stops (``Snapshot``).

Kept apart from the node's own lifecycle (``node.py``) because two nodes may share the host (``host_share.py``):
everything here is the host's, not one node's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from trainer_infra.sandbox import leftovers, netns
from trainer_infra.sandbox.processes import SandboxError

#: Debian packages of the node, and the files of each that the node uses.
PACKAGES: dict[str, tuple[str, ...]] = {
    "containerd": ("/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/bin/ctr"),
    "runc": ("/usr/sbin/runc",),
    "containernetworking-plugins": tuple(f"/usr/lib/cni/{p}" for p in ("bridge", "host-local", "loopback", "portmap")),
    "iptables": ("/usr/sbin/iptables",),
    "busybox-static": ("/bin/busybox",),
    "mmdebstrap": ("/usr/bin/mmdebstrap",),  # builds the runtime stand-in images (runtime_images.py)
    "libcap2-bin": ("/usr/sbin/setcap",),  # sshd's file capability in the MPI stand-in, as upstream's
    "python3-pip": ("/usr/lib/python3/dist-packages/pip",),  # installs the stand-ins' PyPI wheels (JAX, MLX)
    # cluster networking (cluster_network.py): kube-router's policies are ipsets; the tests read conntrack
    "ipset": ("/usr/sbin/ipset",),
    "conntrack": ("/usr/sbin/conntrack",),
}
INSTALL = "apt-get install -y --no-install-recommends " + " ".join(PACKAGES)
#: cgroup v1 controllers the kubelet and runc need (this machine kind mounts each at /sys/fs/cgroup/<name>)
CGROUP_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer", "blkio")
#: the kubelet wants its cgroupRoot in every v1 hierarchy, the named ``systemd`` one included (runc also mirrors
#: the path into the cgroup v2 ``unified`` hierarchy of this hybrid layout: cleaned up too)
CGROUP_HIERARCHIES = (*CGROUP_CONTROLLERS, "systemd")
#: folders containerd 1.6 (shim sockets, FIFOs, pod network namespaces), libcni (its result cache), the kubelet
#: (container log links) and a controller-manager at its defaults (flex volumes) create at fixed places
HOST_PATHS = (
    "/run/containerd",
    "/var/run/netns",
    "/var/lib/cni",
    "/usr/libexec/kubernetes",
    "/var/log/containers",
    "/var/log/pods",
    "/var/lib/kubelet",
    "/etc/cni",
    "/opt/cni",
)
CGROUP_FS = Path("/sys/fs/cgroup")
#: kernel settings the kubelet sets at start (pkg/kubelet/cm: setupKernelTunables); restored by ``stop``
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
#: free space a node session needs where its work folders are: containerd's unpacked images and snapshots (the
#: stand-ins: 0.5-0.7 GB each), pod volumes and logs; each session keeps 3-4 GB. A full disk shows first as
#: kubelet image-GC and eviction errors, far from the cause, so ``preflight`` refuses to start below it.
NODE_SESSION_DISK = 5 * 2**30
#: containerd's default place for pod network namespaces, shared by every node on the host: ours go under each node's
#: containerd state (``netns_mounts_under_state_dir``), so nothing of theirs may appear here; resolved, as the mount
#: table names it (/var/run is a link to /run)
NETNS_DIR = Path("/var/run/netns").resolve()
#: libcni's result cache (containerd 1.6 keeps the default)
CNI_CACHE = Path("/var/lib/cni/results")
#: the kubelet links each container's log here (hard-coded), to the file in its ``podLogsDir``
CONTAINER_LOG_LINKS = Path("/var/log/containers")
#: the shims' sockets (containerd 1.6 hard-codes this directory)
SHIM_SOCKETS = Path("/run/containerd/s")


class NodeError(SandboxError):
    """The real node cannot start here (a package, kernel feature or privilege is missing) or failed."""


#: containerd refuses longer socket paths ("unix socket path too long (> 104)", its ttrpc listener)
SOCKET_PATH_MAX = 104


def containerd_socket(workdir: Path) -> Path:
    """The node's containerd socket (containerd adds ``.ttrpc`` beside it): inside the node's folder, so its path
    length follows the folder's."""
    return workdir / "containerd" / "containerd.sock"


def preflight(workdir: Path | None = None, *, in_session: bool = True) -> None:
    """Name every missing prerequisite with the command that fixes it; never fall back to kwok. ``workdir``: where
    the node's folders go (its disk needs ``NODE_SESSION_DISK`` free). ``in_session=False``: what can be checked
    before the session's namespaces exist (the runner, before it builds anything)."""
    problems = []
    if workdir is not None:
        existing = next(p for p in (workdir.resolve(), *workdir.resolve().parents) if p.exists())
        free = shutil.disk_usage(existing).free
        if free < NODE_SESSION_DISK:
            problems.append(
                f"the disk holding {workdir} has {free / 2**30:.1f} GB free, a node session needs "
                f"{NODE_SESSION_DISK / 2**30:.0f} GB (containerd's images and snapshots, pod volumes): delete earlier "
                "sessions' folders (each node session keeps 3-4 GB in its --basetemp, pytest keeps the last 3 "
                "under /tmp/pytest-of-<user>: `rm -rf --one-file-system <basetemp>`), then `df -h` the path again"
            )
        ttrpc = f"{containerd_socket(workdir.absolute())}.ttrpc"
        if len(ttrpc) > SOCKET_PATH_MAX:
            problems.append(
                f"containerd's socket {ttrpc} would be {len(ttrpc)} characters long, containerd refuses more than "
                f"{SOCKET_PATH_MAX}: use a shorter directory (`--dir` of the sandbox, `--basetemp` of pytest)"
            )
    if os.geteuid() != 0:
        problems.append("it must run as root (containerd, runc, mounts, cgroups)")
    missing = sorted({pkg for pkg, files in PACKAGES.items() for f in files if not Path(f).exists()})
    if missing:
        problems.append(f"Debian packages {missing} are not installed: run `make e2e-node-deps` (= `{INSTALL}`)")
    absent = [c for c in CGROUP_HIERARCHIES if not (CGROUP_FS / c / "cgroup.procs").exists()]
    if absent:
        problems.append(
            f"cgroup v1 controllers {absent} are not mounted under {CGROUP_FS} (this harness drives the cgroup v1 "
            "hierarchy this machine kind has; a cgroup v2 host needs cgroupDriver/cgroupRoot handling it lacks)"
        )
    if in_session and not netns.private():
        problems.append(
            f"it must run in a network namespace of its own (found devices {netns.devices()}): "
            "run it through `make e2e-node` (the e2e runner starts the session with `unshare --net --mount`)"
        )
    if problems:
        raise NodeError("the real node cannot start: " + "; ".join(problems))


def run_host(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise NodeError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def mounts_under(*roots: Path) -> list[str]:
    """Mount points (this mount namespace) inside any of ``roots``, deepest first (the order to unmount)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(r) or point.startswith(f"{r}/") for r in roots):
            found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


#: iptables-save's lines for the built-in chains (their policies stay; every other chain is someone's)
BUILTIN_CHAINS = (":INPUT ", ":OUTPUT ", ":FORWARD ", ":PREROUTING ", ":POSTROUTING ")


def iptables_rules() -> list[str]:
    """Every user chain and rule of this network namespace: ``<tool> <table>: <line of iptables-save>``."""
    lines = []
    for tool in ("iptables", "ip6tables"):
        table = ""
        for line in run_host([f"{tool}-save"], check=False).stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith("-A") or (line.startswith(":") and not line.startswith(BUILTIN_CHAINS)):
                lines.append(f"{tool} {table}: {line}")
    return sorted(lines)


@dataclass
class Snapshot:
    """What the node's namespaces held before it started: ``stop`` returns to it, ``leftovers`` compare with it."""

    devices: list[str]
    rules: list[str]
    shims: list[str]
    host_paths: list[str]
    sysctls: dict[str, str]


def existing(paths: tuple[str, ...]) -> list[str]:
    return [p for p in paths if Path(p).exists()]


def shim_sockets() -> list[str]:
    return sorted(str(p) for p in SHIM_SOCKETS.glob("*")) if SHIM_SOCKETS.is_dir() else []


def shim_socket(address: Path | str, namespace: str, task: str) -> Path:
    """Where containerd 1.6 puts a shim's socket: ``/run/containerd/s/<sha256 of address/namespace/id>``."""
    return SHIM_SOCKETS / hashlib.sha256(f"{address}/{namespace}/{task}".encode()).hexdigest()


def foreign_shim_sockets(own: Path) -> list[str]:
    """The sockets of live shims serving another containerd (another session's node: the directory is the host's)."""
    found = []
    for pid in leftovers.pids():
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not any(a.endswith("containerd-shim-runc-v2") for a in args[:1]):
            continue
        flags = dict(zip(args[1::2], args[2::2], strict=False))
        if {"-address", "-namespace", "-id"} <= flags.keys() and flags["-address"] != str(own):
            found.append(str(shim_socket(flags["-address"], flags["-namespace"], flags["-id"])))
    return found
