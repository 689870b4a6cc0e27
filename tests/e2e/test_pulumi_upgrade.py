"""An upgrade with work in flight through the real engine: JobSet 0.11.1 → 0.12.0 (docs/versions.md, "Upgrade
runbook"), Trainer 2.2.1 and Kueue 0.19.2 unchanged.

Scheduled tier (``make e2e-upgrade``, run by ``.ci/nightly``). One control plane, one Pulumi project, in this order:

1. the first `pulumi up` of the local stack with ``components.jobset.version: 0.11.1``: the 0.11.1 chart (packaged
   from its Go module) and its controller image (built from that module) come through the stack's mirrors;
2. work in flight: TrainJobs running on the kwok GPU nodes that fill the cohort, one pending (no quota left), one
   held (its Workload deactivated: the TrainJob and its JobSet stay suspended);
3. `validate --previous` accepts the step; `pulumi up` to the defaults while a probe keeps submitting a valid
   TrainJob as a member and a JobSet (what Trainer creates; JobSet's own webhooks) as server-side dry-runs, and
   measures the longest window in which either was refused;
4. afterwards: no job lost or restarted (same JobSet, Job and pod UIDs, no restart, Workloads never evicted),
   controllers Ready on the new image with no restart, the webhook certificates kept, CRDs'
   ``status.storedVersions`` only the storage version, the ClusterQueues' usage equal to what their admitted
   Workloads hold; capacity freed: the pending job is admitted, the held one stays suspended until it is
   reactivated, then runs.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import yaml

from tests.e2e import previous_release
from tests.e2e.chart_sandbox import ChartSandbox
from tests.e2e.installed import Deployed
from tests.e2e.kube import ApiError, KubeClient, wait_for
from tests.e2e.node import MIRROR
from tests.e2e.platform import (
    CQ,
    GPU,
    TJ,
    WL,
    Platform,
    Team,
    admitted,
    has_condition,
    trainjob,
    wait_admission_enforced,
    wait_admitted,
    workload_of,
)
from tests.e2e.pulumi_stack import chart_archives, installation
from tests.e2e.render import bind_claims, render_stack
from tests.e2e.test_pulumi_install import cert_secrets
from tests.e2e.versions import REPO_ROOT, VersionSet
from trainer_infra.core.images import mirror_image
from trainer_infra.sandbox.apply import wait_nodes_ready
from trainer_infra.versions import MATRIX

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
JS = ("jobset.x-k8s.io/v1alpha2", "JobSet")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: the CRD groups of the platform's components: each CRD must store only its storage version after the upgrade
GROUPS = ("jobset.x-k8s.io", "kueue.x-k8s.io", "trainer.kubeflow.org")
#: how long the probe waits between two rounds (a round: one try of each probe, ≈ 0.05–0.1 s idle)
PROBE_INTERVAL = 0.1
#: the longest refusal accepted: none was measured (docs/versions.md); this bound leaves room for a loaded machine
#: and fails on a regression such as a Deployment that stops the old pod before the new one serves
MAX_REFUSAL = 10.0


@dataclass
class Upgrade(Deployed):
    """The stack, the work put in flight and what was measured."""

    platform: Platform | None = None
    #: TrainJob name → namespace of the jobs running across the upgrade
    running: dict[str, str] = field(default_factory=dict)
    pending: tuple[str, str] = ("", "")
    held: tuple[str, str] = ("", "")
    before: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, Any] = field(default_factory=dict)

    @property
    def client(self) -> KubeClient:
        return self.sandbox.client

    def teams(self) -> tuple[Team, Team]:
        assert self.platform is not None
        by_ns = {t.namespace: t for t in self.platform.render_teams()}
        return by_ns["nlp"], by_ns["vision"]

    def member(self, team: Team) -> KubeClient:
        return self.sandbox.user_client(team.user, team.groups)


def _components(base: Obj, versions: dict[str, str]) -> Obj:
    """The stack's ``components`` with ``versions`` pinned."""
    components: Obj = json.loads(json.dumps(base["config"]["trainer-platform:components"]))
    for name, version in versions.items():
        components.setdefault(name, {})["version"] = version
    return components


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upgrade]:
    versions = VersionSet.from_env()
    work = tmp_path_factory.mktemp("pulumi-upgrade")
    if os.environ.get("E2E_NO_BUILD") != "1":  # the runner prepared it before the session
        previous_release.prepare(versions)
    charts = [
        *chart_archives(),
        *(previous_release.chart_archive(c, v, work / "charts") for c, v in previous_release.START.items()),
    ]
    render = render_stack("local", tmp_path_factory.mktemp("render") / "out")
    base = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.local.yaml").read_text())
    sandbox = ChartSandbox(work / "sandbox", archives=charts, previous=[previous_release.start_versions(versions)])
    with installation(work, base, sandbox=sandbox) as installed:
        found = Upgrade(installed, base, render, platform=Platform(render, list(render.objects)))
        found.kept["components"] = _components(base, previous_release.START)
        found.set_config()
        bind_claims(found.client, render.of_kind("PersistentVolumeClaim"))
        yield found
        found.report("upgrade", found.outcomes)


def _jobset_image(version: str) -> str:
    release = MATRIX.components["jobset"].release(version)
    assert release is not None
    return release.images["manager"]


def _jobset_pods_run(stack: Upgrade, version: str) -> None:
    """Every JobSet controller container runs the image published under the release's reference."""
    upstream = _jobset_image(version)
    pods = [p for p in stack.sandbox.controller_pods() if p["metadata"]["namespace"] == "jobset-system"]
    assert pods, "no JobSet controller pod"
    for pod in pods:
        for status in pod["status"]["containerStatuses"]:
            assert status["image"] == mirror_image(upstream, MIRROR), (pod["metadata"]["name"], status["image"])
            digest = stack.sandbox.published[upstream]
            assert status["imageID"].endswith(f"@{digest}"), (status["imageID"], digest)


def _stored_versions(client: KubeClient) -> dict[str, tuple[list[str], str]]:
    """CRD → (``status.storedVersions``, its storage version) for the components' groups."""
    found = {}
    for crd in client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        if crd["spec"]["group"] in GROUPS:
            storage = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
            found[crd["metadata"]["name"]] = (list(crd["status"].get("storedVersions", [])), storage)
    return found


def test_up_installs_the_previous_jobset_release(stack: Upgrade) -> None:
    stack.install()
    _jobset_pods_run(stack, previous_release.START["jobset"])
    stored = _stored_versions(stack.client)
    assert stored["jobsets.jobset.x-k8s.io"] == (["v1alpha2"], "v1alpha2"), stored


# -- work in flight ------------------------------------------------------------------------------------------------


def _pods(client: KubeClient, ns: str, job: str) -> list[Obj]:
    return [p for p in client.list("v1", "Pod", ns, label_selector=f"{JOBSET_LABEL}={job}")]


def _running(client: KubeClient, ns: str, job: str, nodes: int) -> bool:
    pods = _pods(client, ns, job)
    return len(pods) == nodes and all(p["status"].get("phase") == "Running" for p in pods)


def _snapshot(stack: Upgrade) -> dict[str, Any]:
    """What must not change while a job keeps running: its JobSet, Jobs, pods (UIDs, restarts), its Workload
    (UID, admission, when it was admitted)."""
    client = stack.client
    found: dict[str, Any] = {}
    for job, ns in sorted(stack.running.items()):
        jobset = client.get(*JS, job, ns)
        workload = workload_of(client, ns, job)
        assert workload is not None, job
        admitted_at = next(c["lastTransitionTime"] for c in workload["status"]["conditions"] if c["type"] == "Admitted")
        found[job] = {
            "trainjob": client.get(*TJ, job, ns)["metadata"]["uid"],
            "jobset": jobset["metadata"]["uid"],
            "jobset restarts": jobset.get("status", {}).get("restarts", 0),
            "jobs": sorted(
                j["metadata"]["uid"] for j in client.list("batch/v1", "Job", ns, label_selector=f"{JOBSET_LABEL}={job}")
            ),
            "pods": {
                p["metadata"]["name"]: (
                    p["metadata"]["uid"],
                    p["status"].get("phase"),
                    sum(int(c.get("restartCount", 0)) for c in p["status"].get("containerStatuses", [])),
                )
                for p in _pods(client, ns, job)
            },
            "workload": (workload["metadata"]["uid"], admitted_at, json.dumps(workload["status"]["admission"])),
            "evicted": [c["type"] for c in workload["status"]["conditions"] if c["type"] in ("Evicted", "Preempted")],
        }
    return found


def _quota_consistent(stack: Upgrade) -> dict[str, tuple[int, int]]:
    """Each ClusterQueue's GPU usage and admitted count as its status says them equal what its admitted Workloads
    hold (Kueue's own accounting, read from the objects); returns CQ → (GPUs, workloads)."""
    client = stack.client
    held: dict[str, list[int]] = {}
    for wl in client.list_all(*WL)["items"]:
        admission = (wl.get("status") or {}).get("admission")
        if not admission or not has_condition(wl, "Admitted") or has_condition(wl, "Finished"):
            continue
        gpus = sum(int(ps.get("resourceUsage", {}).get(GPU, 0)) for ps in admission["podSetAssignments"])
        held.setdefault(admission["clusterQueue"], []).append(gpus)
    found = {}
    for cq in client.list(*CQ):
        name, status = cq["metadata"]["name"], cq.get("status") or {}
        used = sum(
            int(r.get("total", 0))
            for f in status.get("flavorsUsage", [])
            for r in f.get("resources", [])
            if r["name"] == GPU
        )
        expected = held.get(name, [])
        assert (used, status.get("admittedWorkloads", 0)) == (sum(expected), len(expected)), (name, status, expected)
        found[name] = (used, len(expected))
    return found


def _set_active(client: KubeClient, ns: str, job: str, active: bool) -> None:
    workload = workload_of(client, ns, job)
    assert workload is not None, job
    path = client.path(*WL, ns, workload["metadata"]["name"])
    client.request("PATCH", path, {"spec": {"active": active}}, content_type="application/merge-patch+json")


def test_work_in_flight(stack: Upgrade) -> None:
    """The cohort full (nlp's 128 GPUs, vision's 128), one vision job pending behind it, one held."""
    client = stack.client
    nlp, vision = stack.teams()
    wait_nodes_ready(client, [n["metadata"]["name"] for n in stack.render.of_kind("Node")])
    for team in (nlp, vision):
        wait_admission_enforced(client, team.namespace)
    per_node = 8
    jobs = [("run-nlp", nlp, 16), ("run-vision-a", vision, 8), ("run-vision-b", vision, 8)]
    for name, team, nodes in jobs:
        stack.member(team).create(trainjob(name, team.namespace, gpus=per_node, nodes=nodes, queue=team.queue, cpu="1"))
        wait_admitted(client, team.namespace, name, 120)
        stack.running[name] = team.namespace
    for name, team, nodes in jobs:
        wait_for(
            f"{name}'s {nodes} pods Running", functools.partial(_running, client, team.namespace, name, nodes), 180
        )
    me = stack.member(vision)
    for name in ("pending", "held"):
        me.create(trainjob(name, vision.namespace, gpus=per_node, nodes=1, queue=vision.queue, cpu="1"))
        wait_for(f"{name}'s Workload", functools.partial(workload_of, client, vision.namespace, name), 60)
    # an admin holds `held` (docs/teams.md: members cannot lift or set suspend); Kueue keeps it suspended
    _set_active(client, vision.namespace, "held", False)
    stack.pending, stack.held = (vision.namespace, "pending"), (vision.namespace, "held")
    time.sleep(5)  # a scheduling cycle: neither is admitted (the cohort is full)
    for ns, name in (stack.pending, stack.held):
        assert admitted(client, ns, name) is None, name
        assert client.get(*TJ, name, ns)["spec"].get("suspend") is True, name
    stack.outcomes["quota before the upgrade (GPUs, admitted workloads)"] = _quota_consistent(stack)
    stack.before = _snapshot(stack)
    for job, seen in stack.before.items():
        assert seen["pods"] and all(p[1:] == ("Running", 0) for p in seen["pods"].values()), (job, seen["pods"])


# -- the upgrade ---------------------------------------------------------------------------------------------------


@dataclass
class Probe:
    """Submits a valid object as a server-side dry-run again and again; records when (wall clock) each try was
    refused. ``served`` says the answer came through the webhooks that judge it (their defaults are in it): a
    webhook skipped would not count as accepted."""

    name: str
    client: KubeClient
    obj: Obj
    served: Callable[[Obj], bool]
    tries: list[tuple[float, str]] = field(default_factory=list)

    def once(self) -> None:
        started = time.time()
        try:
            answer = self.client.create(self.obj, dry_run=True)
            self.tries.append((started, "" if self.served(answer) else "accepted without the webhooks' defaults"))
        except ApiError as exc:
            self.tries.append((started, exc.message[:300] or str(exc.status)))
        except Exception as exc:  # the connection itself
            self.tries.append((started, f"{type(exc).__name__}: {exc}"[:300]))

    def longest_refusal(self) -> tuple[float, int, list[str]]:
        """(seconds from the first refused try of the longest run of refusals to the next accepted one, refused
        tries in all, their distinct messages)."""
        longest, start = 0.0, None
        for at, error in self.tries:
            if error and start is None:
                start = at
            elif not error and start is not None:
                longest, start = max(longest, at - start), None
        if start is not None:
            longest = max(longest, time.time() - start)
        errors = [e for _, e in self.tries if e]
        return round(longest, 2), len(errors), sorted(set(errors))[:5]


def _probe_jobset() -> Obj:
    """A JobSet as any client (Trainer, for a TrainJob) submits it, in a namespace no team policy covers: only
    JobSet's own webhooks (and Kueue's, which ignores a JobSet without a queue) judge it."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    return {
        "apiVersion": JS[0],
        "kind": JS[1],
        "metadata": {"name": "upgrade-probe", "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}]},
    }


def _summary(output: str) -> list[str]:
    """The engine's ``Resources:`` summary of a run (``~ 5 updated``, ``1234 unchanged``, ...)."""
    lines = output[output.rfind("Resources:") :].splitlines()[1:]
    return [line.strip() for line in itertools.takewhile(str.strip, lines)]


def _jobset_ready_at(stack: Upgrade) -> float:
    """When (epoch seconds) the JobSet controller pod became Ready."""
    (pod,) = [p for p in stack.sandbox.controller_pods() if p["metadata"]["namespace"] == "jobset-system"]
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    return datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


def _validate_previous(stack: Upgrade, target: Obj) -> subprocess.CompletedProcess[str]:
    """`trainer-infra validate --previous <the deployed stack file>` on the stack about to be deployed."""
    deployed = stack.project.workdir / "Pulumi.deployed.yaml"
    deployed.write_text(yaml.safe_dump(stack.installed.config(stack.base, **stack.kept)))
    wanted = stack.project.workdir / "Pulumi.target.yaml"
    wanted.write_text(yaml.safe_dump(target))
    cmd = [sys.executable, "-m", "trainer_infra", "validate", "--config-file", str(wanted), "--previous", str(deployed)]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_upgrade_to_the_defaults_keeps_every_job(stack: Upgrade) -> None:
    assert stack.before, "the work in flight was not set up"
    client = stack.client
    _, vision = stack.teams()
    target = {**stack.kept, "components": _components(stack.base, {})}
    checked = _validate_previous(stack, stack.installed.config(stack.base, **target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    probes = [
        # Kueue's webhook suspends a queued job; JobSet's defaults its network and success policy
        Probe(
            "TrainJob (member, dry-run)",
            stack.member(vision),
            trainjob("upgrade-probe", vision.namespace, gpus=8, nodes=1, queue=vision.queue, cpu="1"),
            lambda answer: answer["spec"].get("suspend") is True,
        ),
        Probe(
            "JobSet (dry-run)",
            client,
            _probe_jobset(),
            lambda answer: (
                (answer["spec"].get("network") or {}).get("enableDNSHostnames") is True
                and bool(answer["spec"].get("successPolicy"))
            ),
        ),
    ]
    for probe in probes:
        probe.once()
        assert not probe.tries[-1][1], f"{probe.name} refused before the upgrade: {probe.tries[-1][1]}"
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            for probe in probes:
                probe.once()
            stop.wait(PROBE_INTERVAL)

    certificates = cert_secrets(stack)
    thread = threading.Thread(target=loop, name="upgrade-probe", daemon=True)
    stack.kept.update(target)
    stack.set_config()
    up_began = time.time()
    thread.start()
    try:
        upgraded = stack.timed("up (JobSet 0.11.1 → 0.12.0, work in flight)", stack.project.up())
        stack.outcomes["the upgrade's changes"] = _summary(upgraded.stdout)
        stack.wait_controllers_ready()
        _jobset_pods_run(stack, MATRIX.defaults["jobset"])
        # the new controller has reconciled every JobSet (its first sync) and every webhook serves again
        time.sleep(20)
    finally:
        stop.set()
        thread.join(timeout=30)
    # the probes ran across the switch: the new controller became Ready while they were submitting
    switched = _jobset_ready_at(stack)
    stack.outcomes["new JobSet controller Ready, s after the up began"] = round(switched - up_began, 1)
    for probe in probes:
        assert probe.tries[0][0] < switched < probe.tries[-1][0], (probe.name, probe.tries[0][0], switched)
        longest, refused, messages = probe.longest_refusal()
        stack.outcomes[f"{probe.name}: longest refusal (s)"] = longest
        stack.outcomes[f"{probe.name}: refused / tries"] = f"{refused} / {len(probe.tries)}"
        stack.outcomes[f"{probe.name}: refusals"] = messages
        assert not probe.tries[-1][1], f"{probe.name} still refused after the upgrade: {probe.tries[-1][1]}"
        assert longest <= MAX_REFUSAL, f"{probe.name} refused for {longest} s: {messages}"
    for key, secret in cert_secrets(stack).items():  # the controllers keep serving with the same certificates
        assert secret.get("data") == certificates[key].get("data"), f"{key}: webhook certificate changed"
    after = _snapshot(stack)
    assert after == stack.before, json.dumps({"before": stack.before, "after": after}, indent=1)[:6000]
    stored = _stored_versions(client)
    assert all(versions == [storage] for versions, storage in stored.values()), stored
    stack.outcomes["CRD storedVersions after"] = {name: v for name, (v, _) in stored.items()}
    stack.outcomes["quota after the upgrade (GPUs, admitted workloads)"] = _quota_consistent(stack)
    for ns, name in (stack.pending, stack.held):
        assert admitted(client, ns, name) is None, f"{name} admitted while the cohort is full"


def test_after_the_upgrade_capacity_frees_and_the_held_job_resumes(stack: Upgrade) -> None:
    assert stack.pending[1], "the work in flight was not set up"
    client = stack.client
    ns, _ = stack.pending
    held_jobset = client.get(*JS, "held", ns)
    assert held_jobset["spec"].get("suspend") is True, held_jobset["spec"]
    # a running job ends: its capacity goes to the pending one, never to the held one
    client.delete(*TJ, "run-vision-b", ns)
    del stack.running["run-vision-b"]
    wait_admitted(client, ns, "pending", 120, " once run-vision-b's GPUs are free")
    wait_for("pending's pod Running", lambda: _running(client, ns, "pending", 1), 120)
    time.sleep(5)
    assert admitted(client, ns, "held") is None, "the held job was admitted while its Workload is inactive"
    assert client.get(*TJ, "held", ns)["spec"].get("suspend") is True
    assert client.get(*JS, "held", ns)["metadata"]["uid"] == held_jobset["metadata"]["uid"]
    assert not _pods(client, ns, "held")
    # resumable: reactivated, it is admitted and its (same) JobSet runs
    _set_active(client, ns, "held", True)
    wait_admitted(client, ns, "held", 120, " once reactivated")
    wait_for("held's pod Running", lambda: _running(client, ns, "held", 1), 120)
    resumed = client.get(*JS, "held", ns)
    assert resumed["metadata"]["uid"] == held_jobset["metadata"]["uid"] and not resumed["spec"].get("suspend")
    stack.running.update({"pending": ns, "held": ns})
    # the jobs that ran across the upgrade still have the same pods, never restarted
    kept = {job: seen for job, seen in _snapshot(stack).items() if job in stack.before}
    assert kept == {job: stack.before[job] for job in kept}, kept
    stack.outcomes["quota at the end (GPUs, admitted workloads)"] = _quota_consistent(stack)
    stack.sandbox.assert_controllers_healthy()
