"""The fleet installed by the real `pulumi up`: one program, one Kubernetes provider per cluster, a MultiKueue
manager and two workers on three control planes, then the fleet's scenarios (tests/e2e/test_fleet.py) on what that
`up` installed.

Opt-in (``make e2e-fleet``; docs/fleet.md gives its time). The clusters keep their harness (each its own etcd, API
server, JobSet/Kueue/Trainer processes on loopback, kwok nodes): the charts' controllers as pods on a real node per
cluster do not fit two cores. Each harness plays a cluster whose platform team already runs the controllers,
configured as the charts would configure them with this stack's values: the charts' RBAC and the controllers'
ServiceAccount identities rendered from the pinned charts, Kueue's scheduling and ``multiKueue`` settings from the
offline render. The stack says so with ``components.<name>.install: false``, and the one `pulumi up` creates
everything else on every cluster: the manager's queues, per-worker flavors, AdmissionCheck, MultiKueueConfig and
MultiKueueClusters, each worker's least-privilege identity and token, the manager's kubeconfig Secrets built from
those tokens, teams, runtimes, admission policies, kwok pools. Nothing is applied by the test.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e import test_fleet as scenarios
from tests.e2e.pulumi_steps import record_timing
from tests.e2e.test_fleet import (
    KUEUE,
    STACK,
    TJ,
    Fleet,
    _active,
    _complete_pods,
    _condition,
    _name,
    _render,
    _running_on,
    _wait_running,
    _with_north,
    trainjob,
)
from trainer_infra.manifests.meta import LEAVING
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.pulumi_stack import PulumiProject, Result
from trainer_infra.sandbox.render import check_versions, kueue_settings, load_render
from trainer_infra.sandbox.toolchain import Toolchain
from trainer_infra.sandbox.versions import CHECKOUT

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
#: the controllers every cluster already runs (the harness): the stack installs no chart
COMPONENTS = ("jobset", "trainer", "kueue")
NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")
#: an untainted kwok node for the kwok controller's pod (a worker's kwok pool), as a cluster's system pool
SYSTEM_NODE = "e2e-system"
TIMINGS: dict[str, float] = {}


@dataclass
class FleetUp(Fleet):
    project: PulumiProject | None = None
    #: the stack as last deployed (``up_stack``), and the workers it lists, in order
    stack: Obj | None = None
    names: tuple[str, ...] = ()

    def up(self, what: str, stack: Obj, names: tuple[str, ...], *, check: bool = True) -> Result:
        """Write ``stack`` (its secrets set again: ``write_stack`` replaces the config) and `pulumi up` it; the
        deployed stack is recorded when the `up` succeeded."""
        assert self.project is not None
        self.project.write_stack(stack)
        set_secrets(self.project, self.manager, self.workers, list(names))
        result = timed(what, self.project.up(check=check))
        if result.returncode == 0:
            self.stack, self.names = stack, names
        return result


def embedded_kubeconfig(sandbox: Sandbox, name: str) -> str:
    """The admin kubeconfig of a harness cluster with its certificates inline (a Pulumi secret in the stack)."""

    def data(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": sandbox.server, "certificate-authority-data": data(sandbox.ca.cert_path)},
            }
        ],
        "users": [
            {
                "name": f"{name}-admin",
                "user": {
                    "client-certificate-data": data(sandbox.admin_cert.cert),
                    "client-key-data": data(sandbox.admin_cert.key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def up_stack(workers: dict[str, Sandbox], edit: Any = None) -> Obj:
    """tests/fleet/Pulumi.fleet.yaml as `pulumi up` gets it: the controllers already installed, each worker's
    `apiServer` its harness (what the manager's Kueue dials), kubeconfigs set as secrets afterwards
    (``set_secrets``); `fleet.multiKueue` lives in the installed Kueue's Configuration (the harness's)."""
    doc: Obj = yaml.safe_load(STACK.read_text())
    config = doc["config"]
    config["trainer-platform:components"] = {
        **{name: {"install": False} for name in COMPONENTS},
        "kueue": {"install": False, "trainJobIntegration": True},
    }
    config["trainer-platform:kubernetes"].pop("kubeconfig")
    fleet = config["trainer-platform:fleet"]
    fleet.pop("multiKueue")
    for worker in fleet["workers"]:
        worker.pop("kubeconfig")
        worker["apiServer"] = workers[worker["name"]].server
    if edit is not None:
        edit(fleet)
    return doc


def set_secrets(project: PulumiProject, manager: Sandbox, workers: dict[str, Sandbox], names: list[str]) -> None:
    project.config_secret("trainer-platform:kubernetes.kubeconfig", embedded_kubeconfig(manager, "manager"))
    for i, name in enumerate(names):
        project.config_secret(
            f"trainer-platform:fleet.workers[{i}].kubeconfig", embedded_kubeconfig(workers[name], name)
        )


def start_cluster(tmp: Path, name: str, render: Path, *, trainer_controller: bool = True) -> Sandbox:
    """A harness cluster running the controllers as the stack's charts would configure them (``render``: the
    offline render with the charts), and nothing of the stack itself."""
    rendered = load_render(render / name)
    sandbox = Sandbox(
        tmp / name,
        kueue_settings=kueue_settings(rendered),
        helm_releases=rendered.helm_releases,
        trainer_controller=trainer_controller,
    )
    sandbox.start()
    try:
        check_versions(rendered, sandbox.versions)
        sandbox.create_kwok_node(SYSTEM_NODE, labels={"node-role.kubernetes.io/control-plane": ""})
    except BaseException:
        sandbox.stop()
        raise
    return sandbox


def timed(name: str, result: Result) -> Result:
    TIMINGS[name] = result.seconds
    record_timing(name, result)
    return result


def installed_by_up(fleet: FleetUp, render: Path) -> list[str]:
    """Every object of each cluster's render that the stack manages (the render without the charts) and that is
    missing on the cluster or was not written by the Kubernetes provider; empty when the `up` created them all."""
    missing = []
    for cluster, sandbox in (("manager", fleet.manager), *fleet.workers.items()):
        for obj in load_render(render / cluster).objects:
            meta = obj["metadata"]
            where = f"{cluster}: {obj['kind']} {meta.get('namespace', '')}/{meta['name']}"
            try:
                found = sandbox.client.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            except ApiError as exc:
                missing.append(f"{where}: {exc}")
                continue
            managers = {m.get("manager", "") for m in found["metadata"].get("managedFields", [])}
            if not any(m.startswith("pulumi-kubernetes") for m in managers):
                missing.append(f"{where}: field managers {sorted(managers)}")
    return missing


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetUp]:
    tmp = tmp_path_factory.mktemp("fleet-up")
    toolchain = Toolchain()
    if os.environ.get("SANDBOX_NO_BUILD") != "1":
        toolchain.build()
    charts = _render(tmp)  # with the charts: how the clusters' own installs are configured
    workers: dict[str, Sandbox] = {}
    manager: Sandbox | None = None
    try:
        began = time.monotonic()
        for name in ("east", "west"):
            workers[name] = start_cluster(tmp, name, charts)
        manager = start_cluster(tmp, "manager", charts, trainer_controller=False)
        TIMINGS["three control planes started"] = round(time.monotonic() - began, 1)
        project = PulumiProject(
            toolchain, tmp / "project", kubeconfig=manager.kubeconfig, ca_bundle=manager.ca.cert_path
        )
        stack = up_stack(workers)
        project.write(stack)
        project.init()
        set_secrets(project, manager, workers, ["east", "west"])
        timed("up (fleet: manager + 2 workers, empty clusters)", project.up())
        found = FleetUp(tmp, manager, workers, project, stack, ("east", "west"))
        up_render = tmp / "up-render"
        (tmp / "Pulumi.fleet-up.yaml").write_text(yaml.safe_dump(_placeholders(stack)))
        _render_file(tmp / "Pulumi.fleet-up.yaml", up_render)
        missing = installed_by_up(found, up_render)
        assert not missing, "objects of the stack not created by `pulumi up`:\n" + "\n".join(missing)
        client = manager.client
        began = time.monotonic()
        for kind, name in (
            ("MultiKueueCluster", "east"),
            ("MultiKueueCluster", "west"),
            ("AdmissionCheck", "multikueue"),
        ):
            wait_for(f"{kind} {name} Active", functools.partial(_active, client, kind, name), 90)
        TIMINGS["MultiKueueClusters Active after the up"] = round(time.monotonic() - began, 1)
        yield found
    finally:
        for started in (manager, *workers.values()):
            if started is not None:
                started.stop()
        print(f"\n[e2e] fleet by pulumi up, timings (s): {TIMINGS}")
        print(f"[e2e] fleet scenarios (s): { {k: round(v, 1) for k, v in scenarios.MEASURED.items()} }")


def _placeholders(stack: Obj) -> Obj:
    """The up's stack with placeholder secrets, for the offline render of what it manages."""
    doc = copy.deepcopy(stack)
    config = doc["config"]
    config["trainer-platform:kubernetes"]["kubeconfig"] = {"secure": "v1:managerkubeconfig"}
    for worker in config["trainer-platform:fleet"]["workers"]:
        worker["kubeconfig"] = {"secure": f"v1:{worker['name']}kubeconfig"}
    return doc


def _render_file(stack: Path, out: Path) -> None:
    cmd = [sys.executable, "-m", "trainer_infra", "render", "--config-file", str(stack), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_the_up_installed_no_chart_and_waited_for_each_controller(fleet: FleetUp) -> None:
    """The stack installs no chart (the clusters run the controllers) and still waits, per cluster, for each
    controller's API before creating what it serves (the readiness gates, registered with the cluster's provider)."""
    assert fleet.project is not None
    state = fleet.project.export()
    resources = state["deployment"]["resources"]
    types = {r["type"] for r in resources}
    assert not any("helm" in t.lower() for t in types), sorted(types)
    names = (r["urn"].rsplit("::", 1)[1] for r in resources if r["type"] == "pulumi-python:dynamic:Resource")
    gates = sorted(n for n in names if n.endswith("-ready"))
    expected = sorted(f"{c}-{g}-ready" for c in ("manager", "east", "west") for g in COMPONENTS)
    assert gates == expected, gates
    providers = [r for r in resources if r["type"] == "pulumi:providers:kubernetes"]
    assert len(providers) == 3, [r["urn"] for r in providers]


# The fleet's scenarios (tests/e2e/test_fleet.py) on what the `up` installed, in this order; the lost worker last.
test_controllers_run_with_only_what_their_charts_grant = (
    scenarios.test_controllers_run_with_only_what_their_charts_grant
)
test_member_submits_with_the_sdk_and_sees_completion = scenarios.test_member_submits_with_the_sdk_and_sees_completion
test_full_worker_sends_the_next_job_to_the_other = scenarios.test_full_worker_sends_the_next_job_to_the_other
test_a_job_too_large_for_any_worker_waits_saying_why = scenarios.test_a_job_too_large_for_any_worker_waits_saying_why


def with_worker(name: str, server: str) -> Any:
    """A `fleet` edit appending worker ``name`` (west's pools) at ``server``."""

    def edit(fleet: Obj) -> None:
        fleet["workers"].append({**copy.deepcopy(fleet["workers"][1]), "name": name, "apiServer": server})

    return edit


def test_a_worker_joins_by_up(fleet: FleetUp) -> None:
    """Both workers full for nlp; a third cluster is appended to `fleet.workers` and `pulumi up` gives it its
    objects and identity and the manager its MultiKueueCluster, kubeconfig Secret and flavors: the next job runs
    there."""
    fill = [_name("fill"), _name("fill")]
    for name in fill:  # 24 GPUs each: all nlp gets on one worker (16 own + 8 borrowed)
        fleet.m.create(trainjob(name, gpus=8, nodes=3))
    assert {_wait_running(fleet, name, 3, 120)[0] for name in fill} == {"east", "west"}

    charts = _render(fleet.tmp, "three", _with_north)  # how north's own controllers are configured
    fleet.workers["north"] = start_cluster(fleet.tmp, "north", charts)
    assert fleet.stack is not None
    stack = up_stack(fleet.workers, with_worker("north", fleet.workers["north"].server))
    began = time.monotonic()
    fleet.up("up (a worker joins)", stack, ("east", "west", "north"))
    active = functools.partial(_active, fleet.m, "MultiKueueCluster", "north")
    wait_for("MultiKueueCluster north Active", active, 90)
    TIMINGS["join: up start → north Active"] = round(time.monotonic() - began, 1)
    third = _name("third")
    submitted = time.monotonic()
    fleet.m.create(trainjob(third, gpus=8, nodes=2))
    worker, _ = _wait_running(fleet, third, 2, 120)
    TIMINGS["join: submit → Running on north"] = round(time.monotonic() - submitted, 1)
    assert worker == "north"
    for name in (*fill, third):
        fleet.m.delete(*TJ, name, "nlp")


@dataclass
class Probe:
    """Submits a one-node TrainJob to the manager as soon as the previous one runs on a worker (then deletes it):
    each dispatch's submit → Running time, or why it failed."""

    fleet: FleetUp
    timeout: float = 120
    results: list[tuple[float, float | None, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            name = _name("probe")
            began = time.monotonic()
            try:
                self.fleet.m.create(trainjob(name, gpus=8, nodes=1))
                worker, _ = _wait_running(self.fleet, name, 1, self.timeout)
                self.results.append((began, time.monotonic() - began, worker))
            except Exception as exc:
                self.results.append((began, None, f"{type(exc).__name__}: {exc}"[:800]))
            finally:
                with contextlib.suppress(ApiError):
                    self.fleet.m.delete(*TJ, name, "nlp")

    def between(self, start: float, end: float) -> list[tuple[float, float | None, str]]:
        return [r for r in self.results if start <= r[0] <= end]


def test_worker_tokens_rotate_by_up_while_jobs_dispatch(fleet: FleetUp) -> None:
    """Every worker's `tokenGeneration` bumped and `pulumi up` while a probe keeps submitting: no dispatch fails;
    the manager's kubeconfig Secrets are updated in place, the old tokens deleted (revoked), and afterwards each
    worker takes a job (so MultiKueue reaches each with its new token)."""
    assert fleet.stack is not None
    before = {w: fleet.m.get("v1", "Secret", f"multikueue-{w}", "kueue-system")["metadata"]["uid"] for w in fleet.names}
    probe = Probe(fleet)
    thread = threading.Thread(target=probe.run, daemon=True)
    thread.start()
    time.sleep(15)  # the probe's baseline
    stack = copy.deepcopy(fleet.stack)
    for worker in stack["config"]["trainer-platform:fleet"]["workers"]:
        worker["tokenGeneration"] = 2
    up_start = time.monotonic()
    fleet.up("up (worker tokens rotate, probe submitting)", stack, fleet.names)
    up_end = time.monotonic()
    time.sleep(20)  # MultiKueue reconnects with the new tokens; the old ones are deleted by now
    probe.stop.set()
    thread.join(probe.timeout + 30)

    failed = [r for r in probe.results if r[1] is None]
    assert not failed, f"dispatches failed during the rotation: {failed}"
    during = probe.between(up_start, up_end + 20)
    baseline = probe.between(0, up_start)
    assert during and baseline, probe.results
    TIMINGS["rotation: dispatches during the up (+20 s)"] = len(during)
    TIMINGS["rotation: longest submit → Running during"] = round(max(r[1] or 0 for r in during), 1)
    TIMINGS["rotation: longest submit → Running before"] = round(max(r[1] or 0 for r in baseline), 1)
    for w in fleet.names:
        client = fleet.workers[w].client
        names = {s["metadata"]["name"] for s in client.list("v1", "Secret", "kueue-system")}
        assert "multikueue-token-2" in names and "multikueue-token-1" not in names, (w, sorted(names))
        secret = fleet.m.get("v1", "Secret", f"multikueue-{w}", "kueue-system")
        assert secret["metadata"]["uid"] == before[w], f"the manager's Secret for {w} was replaced, not updated"
    # one job per worker (24 GPUs: all nlp may use on one worker): each worker is reached with its new token
    jobs = [_name("after") for _ in fleet.names]
    for name in jobs:
        fleet.m.create(trainjob(name, gpus=8, nodes=3))
    assert {_wait_running(fleet, name, 3, 120)[0] for name in jobs} == set(fleet.names)
    for name in jobs:
        fleet.m.delete(*TJ, name, "nlp")


def deployed_with(fleet: FleetUp, edit: Any) -> Obj:
    """The stack as last deployed (token generations included) with ``edit`` applied to its `fleet`."""
    assert fleet.stack is not None
    stack = copy.deepcopy(fleet.stack)
    edit(stack["config"]["trainer-platform:fleet"])
    return stack


def without(name: str) -> Any:
    """A `fleet` edit dropping worker ``name``."""

    def edit(fleet: Obj) -> None:
        fleet["workers"] = [w for w in fleet["workers"] if w["name"] != name]

    return edit


def draining(name: str) -> Any:
    def edit(fleet: Obj) -> None:
        next(w for w in fleet["workers"] if w["name"] == name)["draining"] = True

    return edit


def test_a_worker_drains_and_leaves_by_up(fleet: FleetUp) -> None:
    """north runs a job: the `up` that drops it is refused by the manager's drain-first policy and changes
    nothing. `draining: true` and `up`: its queue stops, its job runs to completion, a new job waits. Then the
    `up` that drops it succeeds: the manager forgets it, its cluster keeps everything (team namespaces, queues,
    runtimes) but the manager's identity, and the Pulumi state no longer names it."""
    assert fleet.stack is not None and "north" in fleet.names
    stay = tuple(n for n in fleet.names if n != "north")
    fill = [_name("fill") for _ in fleet.names]
    for name in fill:  # 24 GPUs each: all nlp gets on one worker (16 own + 8 borrowed), so one per worker
        fleet.m.create(trainjob(name, gpus=8, nodes=3))
    placed = {name: _wait_running(fleet, name, 3, 120) for name in fill}
    assert {worker for worker, _ in placed.values()} == set(fleet.names)
    on_north, pods = next((name, pods) for name, (worker, pods) in placed.items() if worker == "north")
    fill.remove(on_north)
    north = fleet.workers["north"].client
    before = sorted(n["metadata"]["name"] for n in north.list(*NETWORK_POLICY, "nlp"))
    assert before, "north's team namespace has no NetworkPolicy to keep"

    dropped = deployed_with(fleet, without("north"))
    refused = fleet.up("up (a running worker dropped: refused)", dropped, stay, check=False)
    assert refused.returncode != 0
    assert "north removed from the fleet without draining first" in refused.output, refused.output[-3000:]
    assert fleet.m.get(KUEUE, "MultiKueueConfig", "fleet")["spec"]["clusters"] == list(fleet.names)
    assert fleet.m.exists(KUEUE, "MultiKueueCluster", "north")
    assert sorted(n["metadata"]["name"] for n in north.list(*NETWORK_POLICY, "nlp")) == before
    assert north.exists("v1", "ServiceAccount", "multikueue", "kueue-system")
    still = _running_on(fleet, on_north, 3)
    assert still is not None and still[0] == "north", "the refused up must leave north's job running"

    fleet.up("up (north draining)", deployed_with(fleet, draining("north")), fleet.names)
    wait_for(
        "north's Kueue to stop ClusterQueue nlp (stopPolicy Hold)",
        lambda: (_condition(north.get(KUEUE, "ClusterQueue", "nlp"), "Active") or {}).get("reason") == "Stopped",
        30,
    )
    waiting = _name("waiting")
    fleet.m.create(trainjob(waiting, gpus=8, nodes=1))  # every worker is full for nlp
    time.sleep(10)
    assert _running_on(fleet, on_north, 3) is not None, "the draining worker's job must keep running"
    assert _running_on(fleet, waiting, 1) is None, "a draining worker took a new job"
    assert north.get("v1", "Namespace", "nlp")["metadata"]["annotations"][LEAVING] == "true"
    _complete_pods(fleet, "north", pods)
    wait_for(
        f"TrainJob nlp/{on_north} Complete on the manager",
        lambda: (_condition(fleet.m.get(*TJ, on_north, "nlp"), "Complete") or {}).get("status") == "True",
        120,
    )

    left = time.monotonic()
    fleet.up("up (north leaves)", deployed_with(fleet, without("north")), stay)
    TIMINGS["leave: up"] = round(time.monotonic() - left, 1)
    assert fleet.m.get(KUEUE, "MultiKueueConfig", "fleet")["spec"]["clusters"] == list(stay)
    for api, kind, name, ns in (
        (KUEUE, "MultiKueueCluster", "north", None),
        ("v1", "Secret", "multikueue-north", "kueue-system"),
        (KUEUE, "ResourceFlavor", "north.h100", None),
    ):
        assert not fleet.m.exists(api, kind, name, ns), f"the manager kept {kind} {name}"
    # north's cluster keeps what its teams and admins had, and the manager can no longer act there
    assert north.exists("v1", "Namespace", "nlp") and north.exists(KUEUE, "ClusterQueue", "nlp")
    assert north.exists(TJ[0], "ClusterTrainingRuntime", "torch-distributed")
    assert sorted(n["metadata"]["name"] for n in north.list(*NETWORK_POLICY, "nlp")) == before
    assert not north.exists("v1", "ServiceAccount", "multikueue", "kueue-system")
    assert fleet.project is not None
    urns = [r["urn"] for r in fleet.project.export()["deployment"]["resources"]]
    assert not [u for u in urns if "north" in u.rsplit("::", 1)[-1]], "the state still names north"

    for name in fill:
        fleet.m.delete(*TJ, name, "nlp")
    assert _wait_running(fleet, waiting, 1, 120)[0] in stay  # the fleet without north serves the waiting job
    for name in (on_north, waiting):
        fleet.m.delete(*TJ, name, "nlp")
    fleet.workers.pop("north").stop()


test_worker_lost_evicts_and_redispatches = scenarios.test_worker_lost_evicts_and_redispatches
test_a_stranded_job_is_dispatched_again_by_one_command = (
    scenarios.test_a_stranded_job_is_dispatched_again_by_one_command
)
