"""A fleet on three local control planes (manager + 2 workers, each its own etcd/apiserver/controllers on
loopback): the render of tests/fleet/Pulumi.fleet.yaml applied to each, the manager's kubeconfig Secrets
built from each worker's ServiceAccount token the way `pulumi up` builds them (platform/fleet_component.py).

Not the real `pulumi up` (issue #11 builds that); the objects are the render's, byte for byte, except the
`<secret>` kubeconfigs and the workers' loopback addresses. A change of the stack (a worker joins, drains,
leaves) is applied as `pulumi up` would: the new render's objects applied, the objects it no longer has
deleted. The manager runs Trainer 2.2.1 CRDs only (`managerTrainerController: false`), as the fleet docs
prescribe with Kueue 0.19.2. Tests run in file order and share the fleet.
"""

from __future__ import annotations

import copy
import functools
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from trainer_infra.core.objects import WorkerKubeconfig
from trainer_infra.platform.fleet_component import kubeconfig_text
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.kwok_stages import COMPLETE_LABEL
from trainer_infra.sandbox.processes import terminate
from trainer_infra.sandbox.render import (
    apply_objects,
    apply_render,
    check_versions,
    controller_users,
    kueue_settings,
    load_render,
)

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "tests" / "fleet" / "Pulumi.fleet.yaml"
TJ = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
WORKER_LOST_TIMEOUT = 20  # seconds, set in the stack for this test
MEMBER = "alice@example.com"  # a member of team nlp in tests/fleet/Pulumi.fleet.yaml
QUEUE = "kueue.x-k8s.io/queue-name"
MEASURED: dict[str, float] = {}
FOUND: dict[str, str] = {}  # what a member sees, printed for docs/fleet.md


@dataclass
class Fleet:
    tmp: Path
    manager: Sandbox
    workers: dict[str, Sandbox]

    @property
    def m(self) -> KubeClient:
        return self.manager.client


def _render(tmp: Path, name: str = "render", edit: Any = None) -> Path:
    """Render the fleet stack (with `edit` applied to its `fleet` block) into tmp/name."""
    doc = yaml.safe_load(STACK.read_text())
    fleet_cfg = doc["config"]["trainer-platform:fleet"]
    fleet_cfg["multiKueue"] = {"workerLostTimeout": f"{WORKER_LOST_TIMEOUT}s"}
    if edit is not None:
        edit(fleet_cfg)
    stack = tmp / f"Pulumi.fleet-{name}.yaml"
    stack.write_text(yaml.safe_dump(doc))
    out = tmp / name
    cmd = [sys.executable, "-m", "trainer_infra", "render", "--config-file", str(stack), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def _token_data(worker: Sandbox) -> dict[str, str]:
    def filled() -> dict[str, str] | None:
        secret = worker.client.get("v1", "Secret", "multikueue-token-1", "kueue-system")
        data: dict[str, str] = secret.get("data") or {}
        return data if data.get("token") else None

    result: dict[str, str] = wait_for("the worker's token controller to fill multikueue-token-1", filled, 60)
    return result


def _manager_objects(render: Path, workers: dict[str, Sandbox]) -> list[dict[str, Any]]:
    objects = copy.deepcopy(load_render(render).objects)
    for obj in objects:
        name = obj["metadata"]["name"]
        if obj["kind"] == "Secret" and name.startswith("multikueue-") and name[len("multikueue-") :] in workers:
            worker = name[len("multikueue-") :]
            marker = WorkerKubeconfig(worker, "", workers[worker].server, f"{worker}-multikueue")
            obj["stringData"] = {"kubeconfig": kubeconfig_text(marker, _token_data(workers[worker]))}
    return objects


def _start_worker(tmp: Path, name: str, render: Path) -> Sandbox:
    worker_render = load_render(render / name)
    # Controllers run as the ServiceAccounts the charts create, with only the charts' RBAC: the team admission
    # rules trust those names, and a permission the charts lack fails here as on a cluster.
    sb = Sandbox(tmp / name, kueue_settings=kueue_settings(worker_render), helm_releases=worker_render.helm_releases)
    sb.start()
    try:
        apply_render(sb, render / name)
    except BaseException:
        sb.stop()
        raise
    return sb


def _active(client: KubeClient, kind: str, name: str) -> bool:
    obj = client.get(KUEUE, kind, name)
    return any(c["type"] == "Active" and c["status"] == "True" for c in obj.get("status", {}).get("conditions", []))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("fleet")
    out = _render(tmp)
    workers: dict[str, Sandbox] = {}
    manager: Sandbox | None = None
    try:
        for name in ("east", "west"):
            workers[name] = _start_worker(tmp, name, out)
        manager_render = load_render(out / "manager")
        manager = Sandbox(
            tmp / "manager",
            kueue_settings=kueue_settings(manager_render),
            helm_releases=manager_render.helm_releases,
            trainer_controller=False,
        )
        manager.start()
        check_versions(manager_render, manager.versions)
        apply_objects(manager.client, _manager_objects(out / "manager", workers))
        client = manager.client
        for kind, name in (*(("MultiKueueCluster", w) for w in workers), ("AdmissionCheck", "multikueue")):
            wait_for(f"{kind} {name} Active", functools.partial(_active, client, kind, name), 90)
        wait_for("ClusterQueue nlp Active", functools.partial(_active, client, "ClusterQueue", "nlp"), 60)
        yield Fleet(tmp, manager, workers)
    finally:
        for started in (manager, *workers.values()):  # workers: the tests add and remove some
            if started is not None:
                started.stop()
        if MEASURED:
            print("\nfleet e2e measurements (s): " + ", ".join(f"{k}={v:.1f}" for k, v in MEASURED.items()))
        for what, text in FOUND.items():
            print(f"fleet e2e found, {what}: {text}")


def trainjob(name: str, *, gpus: int, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": TJ[0],
        "kind": TJ[1],
        "metadata": {"name": name, "namespace": "nlp", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {
            "runtimeRef": {
                "name": "torch-distributed",
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": {
                "numNodes": nodes,
                "resourcesPerNode": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus), "cpu": "4"}},
            },
        },
    }


def _running_on(fleet: Fleet, name: str, count: int) -> tuple[str, list[dict[str, Any]]] | None:
    for worker, sb in fleet.workers.items():
        try:
            pods = sb.client.list("v1", "Pod", "nlp", label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        except (ApiError, urllib3.exceptions.HTTPError):
            continue  # a stopped worker
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        if len(ok) == count:
            return worker, ok
    return None


def _describe(fleet: Fleet, name: str) -> str:
    lines = []
    for cluster, sb in (("manager", fleet.manager), *fleet.workers.items()):
        try:
            for wl in sb.client.list(KUEUE, "Workload", "nlp"):
                conds = {
                    c["type"]: (c["status"], c.get("message", "")[:160])
                    for c in wl.get("status", {}).get("conditions", [])
                }
                checks = [
                    (c["name"], c["state"], c.get("message", "")[:160])
                    for c in wl.get("status", {}).get("admissionChecks", [])
                ]
                lines.append(f"{cluster} {wl['metadata']['name']}: {conds} {checks}")
        except (ApiError, urllib3.exceptions.HTTPError) as exc:
            lines.append(f"{cluster}: {type(exc).__name__}")
    return "\n".join(lines)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def _wait_running(fleet: Fleet, name: str, count: int, timeout: float) -> tuple[str, list[dict[str, Any]]]:
    try:
        found: tuple[str, list[dict[str, Any]]] = wait_for(
            f"{count} Running pods of nlp/{name} on a worker", lambda: _running_on(fleet, name, count), timeout
        )
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{_describe(fleet, name)}") from None
    return found


def _complete_pods(fleet: Fleet, worker: str, pods: list[dict[str, Any]]) -> None:
    """Let kwok end the pods successfully (the sandbox's completion stage)."""
    remote = fleet.workers[worker].client
    for pod in pods:
        remote.request(
            "PATCH",
            remote.path("v1", "Pod", "nlp", pod["metadata"]["name"]),
            {"metadata": {"labels": {COMPLETE_LABEL: "true"}}},
            content_type="application/merge-patch+json",
        )


def train_fn() -> None:  # the SDK ships this function's source to the trainer container
    print("hello from a fleet worker")


def _allowed(client: KubeClient, verb: str, group: str, resource: str, subresource: str = "") -> bool:
    review = client.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "subresource": subresource}
            },
        },
    )
    return bool(review["status"]["allowed"])


def test_controllers_run_with_only_what_their_charts_grant(fleet: Fleet) -> None:
    """On every cluster the controllers authenticate as the ServiceAccounts the charts create (the names the
    stack's admission rules trust, by the product's naming rule), without `system:masters`: what they may do
    is the RBAC rendered from the pinned charts with the stack's values, and nothing else."""
    for cluster, sandbox in (("manager", fleet.manager), *fleet.workers.items()):
        expected = controller_users(load_render(fleet.tmp / "render" / cluster))
        for component in ("jobset", "kueue", *(("trainer",) if sandbox.runs("trainer") else ())):
            client = sandbox.controller_client(component)
            review = client.request(
                "POST",
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            )
            user = review["status"]["userInfo"]
            assert user["username"] == expected[component], (cluster, component)
            assert "system:masters" not in user.get("groups", []), (cluster, component, user)
            assert not _allowed(client, "create", "rbac.authorization.k8s.io", "clusterrolebindings")
            if component != "trainer":  # Trainer's chart grants Secrets cluster-wide; JobSet and Kueue, their own
                assert not _allowed(client, "list", "", "secrets"), (cluster, component)
        assert _allowed(sandbox.controller_client("kueue"), "update", "kueue.x-k8s.io", "workloads", "status")


def test_member_submits_with_the_sdk_and_sees_completion(fleet: Fleet) -> None:
    """A member of nlp, with their own credential, uses the kubeflow SDK against the manager only."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    from kubeflow.trainer.options import Labels

    kubeconfig = fleet.manager.user_kubeconfig(MEMBER)
    client = TrainerClient(backend_config=KubernetesBackendConfig(namespace="nlp", config_file=str(kubeconfig)))
    runtimes = {r.name for r in client.list_runtimes()}
    assert "torch-distributed" in runtimes, runtimes
    started = time.monotonic()
    name = client.train(
        runtime=client.get_runtime("torch-distributed"),
        trainer=CustomTrainer(func=train_fn, num_nodes=2, resources_per_node={"gpu": 8, "cpu": 4, "memory": "64Gi"}),
        options=[Labels(labels={QUEUE: "default"})],
    )
    stored = fleet.m.get(*TJ, name, "nlp")
    assert stored["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", stored["spec"].get("managedBy")
    worker, pods = _wait_running(fleet, name, 2, 120)
    MEASURED["dispatch_submit_to_running"] = time.monotonic() - started
    assert not fleet.m.list("v1", "Pod", "nlp"), "the manager must not run the job itself"
    assert all(p["spec"]["nodeName"].startswith("h100-") for p in pods)  # the worker's kwok GPU nodes

    # What the SDK shows on the manager while the job runs on a worker: it derives "Running" and the
    # steps from pods in the manager's namespace, and there are none (kubeflow 0.5.0, backend.py).
    running = client.get_job(name)
    FOUND["sdk_while_running"] = f"status={running.status} steps={running.steps} num_nodes={running.num_nodes}"
    assert (running.status, running.steps, running.num_nodes) == ("Created", [], 2)

    _complete_pods(fleet, worker, pods)
    done = client.wait_for_job_status(name, {"Complete"}, timeout=120, polling_interval=1)
    MEASURED["dispatch_submit_to_complete_on_manager"] = time.monotonic() - started
    assert done.status == "Complete"
    client.delete_job(name)


def test_full_worker_sends_the_next_job_to_the_other(fleet: Fleet) -> None:
    """nlp may use 16 GPUs of its own + 8 borrowed per worker: a second 16-GPU job fits only elsewhere."""
    first, second = _name("fill"), _name("next")
    fleet.m.create(trainjob(first, gpus=8, nodes=2))
    worker1, _ = _wait_running(fleet, first, 2, 120)
    fleet.m.create(trainjob(second, gpus=8, nodes=2))
    worker2, _ = _wait_running(fleet, second, 2, 120)
    assert worker2 != worker1
    for name in (first, second):
        fleet.m.delete(*TJ, name, "nlp")


def _manager_workload(fleet: Fleet, name: str) -> dict[str, Any] | None:
    for wl in fleet.m.list(KUEUE, "Workload", "nlp"):
        if any(
            o.get("kind") == "TrainJob" and o.get("name") == name for o in wl["metadata"].get("ownerReferences", [])
        ):
            return wl
    return None


def _evicted(wl: dict[str, Any] | None) -> bool:
    conds = (wl or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Evicted" and c["status"] == "True" for c in conds)


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    return next((c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _copies(fleet: Fleet, workload: str) -> dict[str, bool]:
    """worker → whether MultiKueue created its copy of the manager's Workload there (same name)."""
    return {
        worker: any(w["metadata"]["name"] == workload for w in sb.client.list(KUEUE, "Workload", "nlp"))
        for worker, sb in fleet.workers.items()
    }


def test_a_job_too_large_for_any_worker_waits_saying_why(fleet: Fleet) -> None:
    """32 GPUs: the manager's total for nlp (2 workers × 16 + borrowing) would hold it, no single worker can
    (16 own + 8 borrowed). The manager keeps one flavor per worker pool, so Kueue itself says why, on the
    Workload a member reads (`kubectl get workloads -n nlp` on the manager), and dispatches nothing."""
    name = _name("huge")
    fleet.m.create(trainjob(name, gpus=8, nodes=4))

    def refused() -> dict[str, Any] | None:
        cond = _condition(_manager_workload(fleet, name), "QuotaReserved")
        return cond if cond and cond["status"] == "False" and "maximum capacity" in cond.get("message", "") else None

    cond: dict[str, Any] = wait_for(f"the manager to say why nlp/{name} cannot run", refused, 60)
    FOUND["too_large_workload_condition"] = f"{cond['reason']}: {cond['message']}"
    for flavor in ("east.h100", "west.h100"):
        assert (
            f"insufficient quota for nvidia.com/gpu in flavor {flavor}, previously considered podsets requests (0) "
            "+ current podset request (32) > maximum capacity (24)"
        ) in cond["message"]
    time.sleep(5)  # still nothing dispatched, nothing running
    wl = _manager_workload(fleet, name)
    assert wl is not None
    assert _copies(fleet, wl["metadata"]["name"]) == dict.fromkeys(fleet.workers, False)
    tj = fleet.m.get(*TJ, name, "nlp")
    assert tj["spec"]["suspend"] is True
    FOUND["too_large_trainjob_conditions"] = str(tj.get("status", {}).get("conditions", []))
    fleet.m.delete(*TJ, name, "nlp")


def _apply_manager(fleet: Fleet, render: Path) -> None:
    apply_objects(fleet.m, _manager_objects(render / "manager", fleet.workers))


def _with_north(cfg: dict[str, Any], *, draining: bool = False) -> None:
    west = cfg["workers"][1]
    north = {**copy.deepcopy(west), "name": "north", "apiServer": "https://north.example.com:6443"}
    north["kubeconfig"] = {"secure": "v1:northkubeconfig"}
    if draining:
        north["draining"] = True
    cfg["workers"].append(north)


def _refusal(call: Any) -> str:
    try:
        call()
    except ApiError as exc:
        return str(exc)
    raise AssertionError("the manager's API server accepted it")


def test_a_worker_joins_drains_and_leaves(fleet: Fleet) -> None:
    """Two workers full; a third joins by applying the new render and takes the next job. While it runs
    one, dropping it is refused; drained (`draining: true`), it finishes its job, takes no new one, and
    may then leave. The fleet keeps working without it."""
    fill = [_name("fill"), _name("fill")]
    for name in fill:  # 24 GPUs each: all nlp can get on one worker (16 own + 8 borrowed)
        fleet.m.create(trainjob(name, gpus=8, nodes=3))
    placed = {_wait_running(fleet, name, 3, 120)[0] for name in fill}
    assert placed == {"east", "west"}

    three = _render(fleet.tmp, "three", _with_north)
    fleet.workers["north"] = _start_worker(fleet.tmp, "north", three)
    applied = time.monotonic()
    _apply_manager(fleet, three)
    wait_for("MultiKueueCluster north Active", functools.partial(_active, fleet.m, "MultiKueueCluster", "north"), 90)
    MEASURED["join_manager_apply_to_active"] = time.monotonic() - applied
    third = _name("third")
    submitted = time.monotonic()
    fleet.m.create(trainjob(third, gpus=8, nodes=2))
    worker, pods = _wait_running(fleet, third, 2, 120)
    MEASURED["join_submit_to_running_on_new_worker"] = time.monotonic() - submitted
    assert worker == "north"

    # north runs a job: the render without north (as `pulumi up` would apply it) is refused.
    two = load_render(fleet.tmp / "render" / "manager")
    (config,) = [o for o in two.objects if o["kind"] == "MultiKueueConfig"]
    refused = _refusal(lambda: fleet.m.apply(config, field_manager="trainer-platform"))
    assert "worker(s) north removed from the fleet without draining first" in refused, refused
    refused = _refusal(lambda: fleet.m.delete(KUEUE, "MultiKueueCluster", "north"))
    assert "worker north is not draining" in refused, refused
    FOUND["removal_refused"] = refused

    drain = _render(fleet.tmp, "drain", functools.partial(_with_north, draining=True))
    apply_objects(fleet.workers["north"].client, load_render(drain / "north").objects)
    _apply_manager(fleet, drain)
    north = fleet.workers["north"].client
    stopped = wait_for(
        "north's Kueue to stop ClusterQueue nlp (stopPolicy Hold)",
        lambda: (_condition(north.get(KUEUE, "ClusterQueue", "nlp"), "Active") or {}).get("reason") == "Stopped",
        30,
    )
    assert stopped
    waiting = _name("waiting")
    fleet.m.create(trainjob(waiting, gpus=8, nodes=1))  # only north has 8 GPUs left for nlp
    time.sleep(10)
    still = _running_on(fleet, third, 2)
    assert still is not None and still[0] == "north", "the draining worker's job must keep running"
    assert _running_on(fleet, waiting, 1) is None, "a draining worker took a new job"
    assert _condition(_manager_workload(fleet, third), "Admitted")["status"] == "True"  # type: ignore[index]

    _complete_pods(fleet, "north", pods)  # its last job ends; status still reaches the manager
    wait_for(
        f"TrainJob nlp/{third} Complete on the manager",
        lambda: (_condition(fleet.m.get(*TJ, third, "nlp"), "Complete") or {}).get("status") == "True",
        120,
    )
    # north leaves: the two-worker render applied, then what it no longer has deleted (as Pulumi would).
    apply_objects(fleet.m, _manager_objects(fleet.tmp / "render" / "manager", fleet.workers))
    fleet.m.delete(KUEUE, "MultiKueueCluster", "north")
    fleet.m.delete("v1", "Secret", "multikueue-north", "kueue-system")
    fleet.m.delete(KUEUE, "ResourceFlavor", "north.h100")
    fleet.workers.pop("north").stop()
    assert fleet.m.get(KUEUE, "MultiKueueConfig", "fleet")["spec"]["clusters"] == ["east", "west"]

    for name in fill:
        fleet.m.delete(*TJ, name, "nlp")
    worker, _ = _wait_running(fleet, waiting, 1, 120)  # the fleet without north serves the waiting job
    assert worker in ("east", "west")
    for name in (third, waiting):
        fleet.m.delete(*TJ, name, "nlp")


def test_worker_lost_evicts_and_redispatches(fleet: Fleet) -> None:
    name = _name("lost")
    fleet.m.create(trainjob(name, gpus=8, nodes=2))
    worker, _ = _wait_running(fleet, name, 2, 120)

    def mirrored() -> bool:  # a job that has run a while: MultiKueue copied the worker's status to the manager
        jobs = fleet.m.get(*TJ, name, "nlp").get("status", {}).get("jobsStatus") or []
        return any((j.get("active") or 0) > 0 for j in jobs)

    # Without it the outcome depends on timing: lost before the copy (seen under heavy load), the manager's
    # TrainJob has no active jobs and Kueue does dispatch it again; the case users meet is the one after.
    wait_for(f"the manager's TrainJob nlp/{name} to show its worker's active jobs", mirrored, 60)
    apiserver = next(p for p in fleet.workers[worker].processes if p.name == "kube-apiserver")
    lost_at = time.monotonic()
    terminate(apiserver)
    wait_for(
        f"the manager to evict nlp/{name} after workerLostTimeout ({WORKER_LOST_TIMEOUT}s)",
        lambda: _evicted(_manager_workload(fleet, name)),
        WORKER_LOST_TIMEOUT + 120,
    )
    MEASURED["eviction_after_worker_loss"] = time.monotonic() - lost_at
    assert fleet.m.get(*TJ, name, "nlp")["metadata"]["name"] == name  # nothing lost on the manager
    try:
        other, _ = wait_for(f"nlp/{name} running again on another worker", lambda: _running_on(fleet, name, 2), 120)
    except TimeoutError:
        # Found here (Kueue 0.19.2, Trainer 2.2.1 CRDs only on the manager): the evicted TrainJob keeps the
        # jobsStatus (active: 1) MultiKueue copied from the lost worker; Kueue's job reconciler reports "jobs are
        # still active", waits for them to stop and keeps the quota reservation, and nothing on the manager ever
        # clears that status. The mechanism kubernetes-sigs/kueue#15682 describes (open PR, in no release; the
        # RayJob report is kueue#15380). Kept visible until a fix lands; the next test recovers the job.
        pytest.xfail(
            "no re-dispatch after worker loss (Kueue 0.19.2: 'jobs are still active'; kubernetes-sigs/kueue#15682)"
            f"\n{_describe(fleet, name)}"
        )
    MEASURED["redispatch_after_worker_loss"] = time.monotonic() - lost_at
    assert other != worker


def _stranded(fleet: Fleet) -> list[dict[str, Any]]:
    """The manager's `lost-*` TrainJobs whose Workload is still evicted and reserving quota (the previous test's)."""
    found = []
    for tj in fleet.m.list(*TJ, "nlp"):
        wl = _manager_workload(fleet, tj["metadata"]["name"])
        reserved = (_condition(wl, "QuotaReserved") or {}).get("status") == "True"
        if tj["metadata"]["name"].startswith("lost-") and _evicted(wl) and reserved:
            found.append(tj)
    return found


def _redispatch(fleet: Fleet, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trainer_infra", "fleet", "redispatch", "--kubeconfig", str(fleet.manager.kubeconfig)]
    return subprocess.run(
        [*cmd, "--min-age", "0", *extra], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


def _unfinished_evictions(manager: Sandbox) -> float:
    """What TrainerPlatformWorkloadsStranded reads, from the manager's Kueue /metrics (scraped with a token bound
    to `get /metrics`, as Prometheus does): nlp's admission-check evictions started minus those completed."""
    client, ns, name = manager.client, "kueue-system", "e2e-metrics"
    role: dict[str, Any] = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
    role.update(metadata={"name": name}, rules=[{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
    }
    for obj in (
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
        role,
        binding,
    ):
        client.apply(obj, field_manager="e2e")
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 600}}
    token = client.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token", request)["status"]["token"]
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    http = urllib3.PoolManager(cert_reqs="CERT_NONE")  # the controller's self-signed metrics certificate
    resp = http.request("GET", manager.metrics_urls()["kueue"], headers={"Authorization": f"Bearer {token}"})
    assert resp.status == 200, resp.data[:300]
    text = resp.data.decode()

    def total(metric: str) -> float:
        found = 0.0
        for line in text.splitlines():
            if line.startswith(metric + "{") and 'cluster_queue="nlp"' in line and 'reason="AdmissionCheck"' in line:
                found += float(line.rsplit(" ", 1)[1])
        return found

    return total("kueue_evicted_workloads_total") - total("kueue_workload_eviction_latency_seconds_count")


def test_a_stranded_job_is_dispatched_again_by_one_command(fleet: Fleet) -> None:
    """The job the lost worker stranded (Kueue 0.19.2 keeps it evicted, holding nlp's manager quota, forever):
    `trainer-infra fleet redispatch` on the manager requeues it; it runs on a remaining worker as the same
    TrainJob (same UID) and its completion reaches the manager. Kueue's own counters show the eviction unfinished
    until then (TrainerPlatformWorkloadsStranded's expression), completed after."""
    stranded = _stranded(fleet)
    if not stranded:
        pytest.skip("no job stranded by the test above (Kueue dispatched it again itself, or that test failed)")
    (job,) = stranded
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    assert _unfinished_evictions(fleet.manager) == 1, "TrainerPlatformWorkloadsStranded's signal"

    listed = _redispatch(fleet, "--dry-run")
    assert listed.returncode == 0 and f"stranded: nlp/{name} " in listed.stdout, listed.stdout + listed.stderr
    assert _stranded(fleet), "--dry-run changed something"
    began = time.monotonic()
    done = _redispatch(fleet)
    assert done.returncode == 0 and f"requeued: nlp/{name} " in done.stdout, done.stdout + done.stderr
    lost = {
        w for w, sb in fleet.workers.items() if not any(p.alive() for p in sb.processes if p.name == "kube-apiserver")
    }
    worker, pods = _wait_running(fleet, name, 2, 120)
    MEASURED["redispatch_command_to_running"] = time.monotonic() - began
    assert worker not in lost, (worker, lost)
    assert fleet.m.get(*TJ, name, "nlp")["metadata"]["uid"] == uid, "the TrainJob must be the member's, not a copy"
    _complete_pods(fleet, worker, pods)
    wait_for(
        f"TrainJob nlp/{name} Complete on the manager",
        lambda: (_condition(fleet.m.get(*TJ, name, "nlp"), "Complete") or {}).get("status") == "True",
        120,
    )
    assert _unfinished_evictions(fleet.manager) == 0, "the eviction completed: the alert resolves"
    assert _redispatch(fleet).stdout.startswith("no stranded TrainJob"), "a finished job is not stranded"
    fleet.m.delete(*TJ, name, "nlp")
