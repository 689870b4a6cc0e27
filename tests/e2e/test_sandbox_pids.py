"""The per-pod PID limit on the real node (the sandbox session, tests/e2e/sandbox_session.py): a team member's job
floods its pod with processes, as a fork bomb does, and the kernel stops it at the pod's limit, the one the sandbox
stack's pool sets (``nodePools[].podPidsLimit``, the kubelet's ``podPidsLimit``). Asserted from the host: the pod's
pids cgroup has ``pids.max`` = the setting and its ``pids.events`` counts the refused forks; from the job's own
output: its forks failed with EAGAIN; from the cluster: the node stays Ready and another team's job, running before
the flood, keeps running (a tick a second, none missing) and completes.

The flood forks one process at a time until the kernel refuses, not exponentially as a shell fork bomb does: the
limit is reached all the same, without burning this shared machine's two cores for the bomb's retries.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e.platform import unique
from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from tests.e2e.test_sandbox_network import script_trainjob
from tests.e2e.test_sandbox_up import TJ, elapsed, finished
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.platform_sandbox import node_dir, real_node_pids, sandbox_stack

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]

PIDS = Path("/sys/fs/cgroup/pids")
#: forks until the kernel refuses, then holds the processes while the host reads the pod's cgroup; ends cleanly (its
#: exit as the container's first process ends every process it forked)
FLOOD = """
import subprocess, time
procs, refused = [], None
while len(procs) < 100000:
    try:
        procs.append(subprocess.Popen(['sleep', '120']))
    except OSError as exc:
        refused = exc
        break
print(f'forked: {len(procs)}', flush=True)
print(f'refused: {refused!r}', flush=True)
time.sleep(20)
"""
#: the other team's job: a tick a second for TICKS seconds
TICKS = 50
STEADY = f"""
import time
for i in range({TICKS}):
    print(f'tick {{i}}', flush=True)
    time.sleep(1)
print('done', flush=True)
"""


def _pod(sb: RunningSandbox, who: Member, name: str) -> Obj | None:
    """The Running pod of TrainJob ``name``."""
    pods = sb.admin.list("v1", "Pod", who.namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return next((p for p in pods if p.get("status", {}).get("phase") == "Running"), None)


def _log(sb: RunningSandbox, who: Member, name: str) -> str:
    pods = sb.admin.list("v1", "Pod", who.namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return "\n".join(sb.admin.log(p["metadata"]["name"], who.namespace) for p in pods)


def _pod_cgroup(uid: str) -> Path:
    """The pod's cgroup in the pids hierarchy (the kubelet's cgroupfs driver: ``<root>/kubepods/<qos>/pod<uid>``)."""
    found = [p for p in PIDS.glob(f"trainer-platform-e2e-*/kubepods/**/pod{uid}") if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


def _refused_forks(cgroup: Path) -> int:
    """``pids.events`` ``max`` summed over the pod's cgroup and its containers': before Linux 6.12 the kernel counts
    a refused fork in the cgroup of the task that forked (a container's), not in the one whose limit refused it
    (kernel/cgroup/pids.c ``pids_can_fork``)."""
    total = 0
    for group in (cgroup, *(p for p in cgroup.iterdir() if (p / "pids.events").exists())):
        events = dict(line.split() for line in (group / "pids.events").read_text().splitlines())
        total += int(events["max"])
    return total


def _ready(sb: RunningSandbox) -> bool:
    node = sb.admin.get("v1", "Node", sb.node)
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_a_members_fork_flood_stops_at_the_pod_limit_and_the_node_and_another_teams_job_carry_on(
    platform_sandbox: RunningSandbox,
) -> None:
    sb = platform_sandbox
    start = time.monotonic()
    limit = real_node_pids(sandbox_stack())
    kubelet = (node_dir(sb.state) / "kubelet.yaml").read_text()
    assert f"podPidsLimit: {limit}\n" in kubelet  # the real node's kubelet runs with the stack's setting

    bomber, other = sb.member(0), sb.member(1)
    assert bomber.team != other.team
    steady, flood = unique("steady"), unique("flood")
    other.client().create(script_trainjob(other, steady, 1, STEADY, {}))
    wait_for(f"{other.namespace}/{steady} to run", lambda: "tick" in _log(sb, other, steady), 180)

    bomber.client().create(script_trainjob(bomber, flood, 1, FLOOD, {}))
    pod = wait_for(f"{bomber.namespace}/{flood} to fork until refused", lambda: _pod(sb, bomber, flood), 180)
    wait_for("the flood to be refused", lambda: "refused:" in _log(sb, bomber, flood), 60)
    cgroup = _pod_cgroup(pod["metadata"]["uid"])
    pids_max = (cgroup / "pids.max").read_text().strip()
    refused = _refused_forks(cgroup)
    current = int((cgroup / "pids.current").read_text())
    log = _log(sb, bomber, flood)
    print(f"\n[pids] {cgroup}: max {pids_max}, current {current}, refused forks {refused}\n{log}", flush=True)
    assert pids_max == str(limit)
    assert refused > 0 and current <= limit
    forked = int(log.split("forked: ")[1].split()[0])
    assert 0 < forked < limit and "Resource temporarily unavailable" in log, log

    assert _ready(sb)
    assert finished(sb.admin, other.namespace, steady) is None  # still running while the flood holds its PIDs
    done = wait_for(f"{other.namespace}/{steady} to finish", lambda: finished(sb.admin, other.namespace, steady), 120)
    conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    steady_log = _log(sb, other, steady)
    assert conditions.get("Complete") == "True", (done["status"], steady_log)
    assert [f"tick {i}" for i in range(TICKS)] + ["done"] == steady_log.splitlines()[-TICKS - 1 :], steady_log
    wait_for(f"{bomber.namespace}/{flood} to finish", lambda: finished(sb.admin, bomber.namespace, flood), 120)
    assert _ready(sb)
    for who, name in ((other, steady), (bomber, flood)):
        sb.admin.delete(TJ, "TrainJob", name, who.namespace)
    print(f"[pids] took {elapsed(start)} s", flush=True)
