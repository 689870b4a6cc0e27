"""Upgrades with work in flight through the real engine, one `pulumi up` per component as the runbook says
(docs/versions.md, "Upgrade runbook"): JobSet 0.11.1 → 0.12.0, then Kueue 0.18.3 → 0.19.2, then Trainer 2.2.0 →
2.2.1.

Scheduled tier (``make e2e-upgrade``, run by ``.ci/nightly``); the Kueue step unless ``E2E_UPGRADE_KUEUE=0``
(``previous_release.KUEUE_STEP``). One control plane, one Pulumi project, in this order:

1. the first `pulumi up` of the local stack with ``components.jobset.version: 0.11.1`` and
   ``components.trainer.version: 2.2.0`` (and, with the Kueue step, ``components.kueue.version: 0.18.3``): their
   charts (packaged from their Go modules) and controller images (built from those modules) come through the
   stack's mirrors;
2. work in flight: TrainJobs running on the kwok GPU nodes that fill the cohort, one pending (no quota left), one
   held (its Workload deactivated: the TrainJob and its JobSet stay suspended);
3. per component: `validate --previous` accepts the step; `pulumi up` with that component's pin removed while a
   probe keeps submitting a valid TrainJob as a member (Kueue's webhook) and a JobSet (what Trainer creates;
   JobSet's own webhooks) as server-side dry-runs, and measures the longest window in which either was refused;
   after Kueue's, `trainer-infra storage-versions --migrate` (the runbook's step) clears the Kueue CRDs'
   ``status.storedVersions``; Trainer's also keeps every TrainJob's and JobSet's spec (same generation) and every
   runtime the stack wrote (same UID: updated in place, never replaced);
4. after each: no job lost or restarted (same JobSet, Job and pod UIDs, no restart, Workloads never evicted),
   no Kueue queue object replaced (same UIDs), controllers Ready on the new image with no restart, the webhook
   certificates kept, CRDs' ``status.storedVersions`` only the storage version, the ClusterQueues' usage equal to
   what their admitted Workloads hold; at the end, capacity freed: the pending job is admitted, the held one stays
   suspended until it is reactivated, then runs.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import yaml

from tests.e2e import previous_release
from tests.e2e.installed import Deployed
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
    wait_admitted,
    workload_of,
)
from tests.e2e.test_pulumi_install import cert_secrets
from tests.e2e.upgrade_probe import JS, MAX_REFUSAL, PROBE_INTERVAL, ControllerWatch, Probe, probe_jobset
from trainer_infra.core.images import mirror_image
from trainer_infra.sandbox.apply import wait_nodes_ready
from trainer_infra.sandbox.chart_sandbox import ChartSandbox
from trainer_infra.sandbox.kube import KubeClient, wait_for
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.probes import wait_admission_enforced
from trainer_infra.sandbox.pulumi_stack import chart_archives, installation
from trainer_infra.sandbox.render import bind_claims, render_stack
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet
from trainer_infra.versions import MATRIX

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: the CRD groups of the platform's components: each CRD must store only its storage version after the upgrade
GROUPS = ("jobset.x-k8s.io", "kueue.x-k8s.io", "trainer.kubeflow.org")


@dataclass
class Upgrade(Deployed):
    """The stack, the work put in flight and what was measured."""

    platform: Platform | None = None
    #: TrainJob name → namespace of the jobs running across the upgrade
    running: dict[str, str] = field(default_factory=dict)
    pending: tuple[str, str] = ("", "")
    held: tuple[str, str] = ("", "")
    before: dict[str, Any] = field(default_factory=dict)
    #: ``Kind/ns/name`` → UID of the Kueue objects the stack wrote, as first installed
    queues: dict[str, str] = field(default_factory=dict)
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
    if os.environ.get("SANDBOX_NO_BUILD") != "1":  # the runner prepared it before the session
        previous_release.prepare(versions)
    charts = [
        *chart_archives(),
        *(previous_release.chart_archive(c, v, work / "charts") for c, v in previous_release.START.items()),
    ]
    render = render_stack("local", tmp_path_factory.mktemp("render") / "out")
    base = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())
    sandbox = ChartSandbox(work / "sandbox", archives=charts, previous=[previous_release.start_versions(versions)])
    with installation(work, base, sandbox=sandbox) as installed:
        found = Upgrade(installed, base, render, platform=Platform(render, list(render.objects)))
        found.kept["components"] = _components(base, previous_release.START)
        found.set_config()
        bind_claims(found.client, render.of_kind("PersistentVolumeClaim"))
        yield found
        found.report("upgrade", found.outcomes)


def _manager_image(component: str, version: str) -> str:
    release = MATRIX.components[component].release(version)
    assert release is not None
    return release.images["manager"]


#: the labels of a component's controller pods, where its namespace runs other controllers too (Trainer's chart
#: runs the LWS subchart's beside its manager: templates/manager/_helpers.tpl, trainer.manager.selectorLabels)
MANAGER_LABELS = {"trainer": {"app.kubernetes.io/component": "manager", "app.kubernetes.io/part-of": "kubeflow"}}


def _controller_pods(stack: Upgrade, component: str) -> list[Obj]:
    namespace = MATRIX.components[component].namespace
    labels = MANAGER_LABELS.get(component, {})
    return [
        p
        for p in stack.sandbox.controller_pods()
        if p["metadata"]["namespace"] == namespace
        and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
    ]


def _pods_run(stack: Upgrade, component: str, version: str) -> None:
    """Every controller container of ``component`` runs the image published under the release's reference."""
    upstream = _manager_image(component, version)
    pods = _controller_pods(stack, component)
    assert pods, f"no {component} controller pod"
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


def _uids(stack: Upgrade, group: str) -> dict[str, str]:
    """``Kind/namespace/name`` → UID of every object of API group ``group`` the stack renders."""
    found = {}
    for obj in stack.render.objects:
        if obj["apiVersion"].startswith(f"{group}/"):
            meta = obj["metadata"]
            live = stack.client.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            found[f"{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"] = live["metadata"]["uid"]
    return found


def _queue_objects(stack: Upgrade) -> dict[str, str]:
    """``Kind/namespace/name`` → UID of every Kueue object the stack renders (ClusterQueues, LocalQueues, Cohorts,
    Topology, ResourceFlavors, WorkloadPriorityClasses): a replaced one (deleted and created) gets a new UID, and a
    replaced ClusterQueue or LocalQueue evicts what it admitted."""
    return _uids(stack, "kueue.x-k8s.io")


def test_up_installs_the_previous_releases(stack: Upgrade) -> None:
    stack.install()
    for component, version in previous_release.START.items():
        _pods_run(stack, component, version)
    stored = _stored_versions(stack.client)
    assert stored["jobsets.jobset.x-k8s.io"] == (["v1alpha2"], "v1alpha2"), stored
    trainer = {name: versions for name, versions in stored.items() if name.endswith(".trainer.kubeflow.org")}
    assert len(trainer) == 3 and all(v == (["v1alpha1"], "v1alpha1") for v in trainer.values()), trainer
    # Kueue 0.18 already stores v1beta2 (since 0.16), and serves v1beta1 beside it
    kueue = {name: versions for name, versions in stored.items() if name.endswith(".kueue.x-k8s.io")}
    assert kueue and all(v == (["v1beta2"], "v1beta2") for v in kueue.values()), kueue
    assert {o["apiVersion"] for o in stack.render.objects if o["apiVersion"].startswith("kueue.x-k8s.io/")} == {
        "kueue.x-k8s.io/v1beta2"
    }
    stack.queues = _queue_objects(stack)


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


def _summary(output: str) -> list[str]:
    """The engine's ``Resources:`` summary of a run (``~ 5 updated``, ``1234 unchanged``, ...)."""
    lines = output[output.rfind("Resources:") :].splitlines()[1:]
    return [line.strip() for line in itertools.takewhile(str.strip, lines)]


def _ready_at(stack: Upgrade, component: str) -> float:
    """When (epoch seconds) the component's controller pod became Ready."""
    (pod,) = _controller_pods(stack, component)
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    return datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


def _validate_previous(stack: Upgrade, target: Obj) -> subprocess.CompletedProcess[str]:
    """`trainer-infra validate --previous <the deployed stack file>` on the stack about to be deployed."""
    deployed = stack.project.workdir / "Pulumi.deployed.yaml"
    deployed.write_text(yaml.safe_dump(stack.installed.config(stack.base, **stack.kept)))
    wanted = stack.project.workdir / "Pulumi.target.yaml"
    wanted.write_text(yaml.safe_dump(target))
    cmd = [sys.executable, "-m", "trainer_infra", "validate", "--config-file", str(wanted), "--previous", str(deployed)]
    return subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=300)


def _probes(stack: Upgrade) -> list[Probe]:
    _, vision = stack.teams()
    return [
        # Kueue's webhook suspends a queued job; JobSet's defaults its network and success policy
        Probe(
            "TrainJob (member, dry-run)",
            stack.member(vision),
            trainjob("upgrade-probe", vision.namespace, gpus=8, nodes=1, queue=vision.queue, cpu="1"),
            lambda answer: answer["spec"].get("suspend") is True,
        ),
        Probe(
            "JobSet (dry-run)",
            stack.client,
            probe_jobset(),
            lambda answer: (
                (answer["spec"].get("network") or {}).get("enableDNSHostnames") is True
                and bool(answer["spec"].get("successPolicy"))
            ),
        ),
    ]


def _upgrade(stack: Upgrade, component: str, pinned: dict[str, str]) -> str:
    """One runbook step: `validate --previous`, then `pulumi up` with ``component``'s pin removed (``pinned``: what
    stays pinned) while the probes run across the switch of its controller; records what was measured under
    ``<component>: …``; the engine's output."""
    assert stack.before, "the work in flight was not set up"
    target = {**stack.kept, "components": _components(stack.base, pinned)}
    checked = _validate_previous(stack, stack.installed.config(stack.base, **target))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    probes = _probes(stack)
    for probe in probes:
        probe.once()
        assert not probe.tries[-1][1], f"{probe.name} refused before the upgrade: {probe.tries[-1][1]}"
    stop = threading.Event()

    watched = ControllerWatch(stack.client, functools.partial(_controller_pods, stack, component))

    def loop() -> None:
        while not stop.is_set():
            for probe in probes:
                probe.once()
            watched.once()
            stop.wait(PROBE_INTERVAL)

    certificates = cert_secrets(stack)
    thread = threading.Thread(target=loop, name="upgrade-probe", daemon=True)
    stack.kept.update(target)
    stack.set_config()
    previous, version = previous_release.START[component], MATRIX.defaults[component]
    up_began = time.time()
    thread.start()
    try:
        upgraded = stack.timed(f"up ({component} {previous} → {version}, work in flight)", stack.project.up())
        stack.outcomes[f"{component}: the upgrade's changes"] = _summary(upgraded.stdout)
        stack.wait_controllers_ready()
        _pods_run(stack, component, version)
        # the new controller has reconciled every object (its first sync) and every webhook serves again
        time.sleep(20)
    finally:
        stop.set()
        thread.join(timeout=30)
    # the probes ran across the switch: the new controller became Ready while they were submitting
    switched = _ready_at(stack, component)
    stack.outcomes[f"{component}: new controller Ready, s after the up began"] = round(switched - up_began, 1)
    stack.outcomes[f"{component}: controller pods during the up"] = watched.seen
    for probe in probes:
        assert probe.tries[0][0] < switched < probe.tries[-1][0], (probe.name, probe.tries[0][0], switched)
        longest, refused, messages = probe.longest_refusal()
        stack.outcomes[f"{component}: {probe.name}: longest refusal (s)"] = longest
        stack.outcomes[f"{component}: {probe.name}: refused / tries"] = f"{refused} / {len(probe.tries)}"
        stack.outcomes[f"{component}: {probe.name}: refusals"] = messages
        assert not probe.tries[-1][1], f"{probe.name} still refused after the upgrade: {probe.tries[-1][1]}"
        assert longest <= MAX_REFUSAL, f"{probe.name} refused for {longest} s: {messages}\n{watched.seen}"
    for key, secret in cert_secrets(stack).items():  # the controllers keep serving with the same certificates
        assert secret.get("data") == certificates[key].get("data"), f"{key}: webhook certificate changed"
    return upgraded.stdout


def _nothing_lost(stack: Upgrade, step: str) -> None:
    """The same jobs running (UIDs, restarts, admissions), the same queue objects, quota consistent, the pending
    and held jobs still not admitted."""
    client = stack.client
    after = _snapshot(stack)
    assert after == stack.before, json.dumps({"before": stack.before, "after": after}, indent=1)[:6000]
    assert _queue_objects(stack) == stack.queues, "a Kueue queue object was replaced"
    stack.outcomes[f"quota after {step} (GPUs, admitted workloads)"] = _quota_consistent(stack)
    for ns, name in (stack.pending, stack.held):
        assert admitted(client, ns, name) is None, f"{name} admitted while the cohort is full"


def _pinned_after(component: str) -> dict[str, str]:
    """What stays pinned in ``component``'s step: the start releases of the components upgraded after it."""
    later = previous_release.ORDER[previous_release.ORDER.index(component) + 1 :]
    return {c: v for c, v in previous_release.START.items() if c in later}


def test_upgrade_jobset_keeps_every_job(stack: Upgrade) -> None:
    _upgrade(stack, "jobset", _pinned_after("jobset"))
    stored = _stored_versions(stack.client)
    assert all(versions == [storage] for versions, storage in stored.values()), stored
    _nothing_lost(stack, "the JobSet upgrade")


def _set_stored_versions(client: KubeClient, crd: str, versions: list[str]) -> None:
    path = client.path("apiextensions.k8s.io/v1", "CustomResourceDefinition", name=crd) + "/status"
    client.request("PATCH", path, {"status": {"storedVersions": versions}}, content_type="application/merge-patch+json")


def _storage_versions(stack: Upgrade, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainer-infra storage-versions` as the admin, with the cluster's kubeconfig."""
    cmd = [sys.executable, "-m", "trainer_infra", "storage-versions", "--kubeconfig", str(stack.sandbox.kubeconfig)]
    return subprocess.run([*cmd, *args], cwd=CHECKOUT, capture_output=True, text=True, timeout=600)


#: the Kueue CRDs whose status lists v1beta1 before the upgrade, as on a cluster first installed with Kueue ≤ 0.15
#: (v1beta1 its storage version): the Workloads running across it and the ClusterQueues that admitted them
OLD_STORED = ("workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io")


@pytest.mark.skipif(
    "kueue" not in previous_release.START,
    reason="E2E_UPGRADE_KUEUE=0: no Kueue step",
)
def test_upgrade_kueue_keeps_every_job_and_queue(stack: Upgrade) -> None:
    """Kueue 0.18.3 → 0.19.2; then the runbook's stored-version step. 0.18 already stores v1beta2, so this
    cluster's objects are stored as v1beta2: the status of OLD_STORED is set to list v1beta1 too, as a cluster
    whose Kueue started at 0.15 or older shows it, so that `storage-versions --migrate` has work to do."""
    client = stack.client
    for crd in OLD_STORED:
        _set_stored_versions(client, crd, ["v1beta1", "v1beta2"])
    output = _upgrade(stack, "kueue", _pinned_after("kueue"))
    replaced = [line.strip() for line in output.splitlines() if "kueue.x-k8s.io" in line and "replac" in line]
    assert not replaced, replaced
    _nothing_lost(stack, "the Kueue upgrade")
    # the runbook's step after the up: the CRDs that list v1beta1 (exit 1), migrated (exit 0)
    listed = _storage_versions(stack)
    assert listed.returncode == 1, listed.stdout + listed.stderr
    assert all(f"{crd}: storedVersions ['v1beta1', 'v1beta2']" in listed.stdout for crd in OLD_STORED), listed.stdout
    began = time.monotonic()
    migrated = _storage_versions(stack, "--migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    stack.outcomes["kueue: storage-versions --migrate"] = [
        *migrated.stdout.splitlines(),
        f"{time.monotonic() - began:.1f} s",
    ]
    stored = _stored_versions(client)
    assert all(versions == [storage] for versions, storage in stored.values()), stored
    stack.outcomes["CRD storedVersions after"] = {name: v for name, (v, _) in stored.items()}
    # rewriting every Workload and ClusterQueue evicted nothing and replaced nothing
    time.sleep(5)
    _nothing_lost(stack, "the stored-version migration")


def _generations(stack: Upgrade) -> dict[str, tuple[int, int]]:
    """TrainJob name → (its generation, its JobSet's) for the running, pending and held jobs: a controller that
    rewrote a job's spec (Trainer rebuilding a JobSet from a changed runtime) raises one."""
    jobs = {**stack.running, stack.pending[1]: stack.pending[0], stack.held[1]: stack.held[0]}
    return {
        job: (
            int(stack.client.get(*TJ, job, ns)["metadata"]["generation"]),
            int(stack.client.get(*JS, job, ns)["metadata"]["generation"]),
        )
        for job, ns in sorted(jobs.items())
    }


@pytest.mark.skipif("trainer" not in previous_release.START, reason="the start set installs the default Trainer")
def test_upgrade_trainer_keeps_every_job_and_runtime(stack: Upgrade) -> None:
    """Trainer 2.2.0 → 2.2.1, the last step. The chart changes the manager's image and its labels' version, the CRDs
    only in their field descriptions; the stack's runtimes change their images' tags (v2.2.0 → v2.2.1) and the
    admission policies the cache image they allow. Trainer 2.2 puts a finalizer on a runtime a TrainJob uses, so a
    runtime replaced (deleted, then created) would wait for every job on it."""
    generations = _generations(stack)
    runtimes = _uids(stack, "trainer.kubeflow.org")
    assert runtimes, "the stack renders no runtime"
    output = _upgrade(stack, "trainer", _pinned_after("trainer"))
    replaced = [line.strip() for line in output.splitlines() if "trainer.kubeflow.org" in line and "replac" in line]
    assert not replaced, replaced
    # the chart's public ConfigMap (the Trainer version clients read) changes its data: the provider replaces it
    # (a ConfigMap is immutable to it), so it is briefly absent; the first run's state history showed that one
    stack.outcomes["trainer: replaced"] = [line.strip() for line in output.splitlines() if "replaced" in line]
    public = stack.client.get("v1", "ConfigMap", "kubeflow-trainer-public", MATRIX.components["trainer"].namespace)
    assert public["data"] == {"kubeflow_trainer_version": f"v{MATRIX.defaults['trainer']}"}, public["data"]
    stored = _stored_versions(stack.client)
    assert all(versions == [storage] for versions, storage in stored.values()), stored
    stack.outcomes["CRD storedVersions after"] = {name: v for name, (v, _) in stored.items()}
    _nothing_lost(stack, "the Trainer upgrade")
    assert _uids(stack, "trainer.kubeflow.org") == runtimes, "a runtime was replaced"
    after = _generations(stack)
    assert after == generations, {"before": generations, "after": after}
    stack.outcomes["trainer: TrainJob and JobSet generations, unchanged"] = after


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
