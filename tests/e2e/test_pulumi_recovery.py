"""Interrupted `pulumi up` and `destroy` through the real engine, and the documented recovery (docs/recovery.md).

Opt-in (``make e2e-recovery``): it runs the local stack's install several times over. One control plane and one
Pulumi project; each test starts from the converged stack the previous one left, as an operator would:

1. the first `up` SIGKILLed while the charts' objects are being created (the state shows pending creates):
   `trainer-infra recover` then `up --refresh` converge, nothing duplicated or orphaned;
2. the API server stopped while an `up` adds a team, then started again: the same recovery converges;
3. an `up` killed with ``PULUMI_SKIP_CHECKPOINTS=true``: the state recorded nothing of it, the next `up` fails on
   every object it had created; `recover --adopt-existing` repairs it;
4. the teardown's `destroy` killed half-way: running it again finishes it, leaving only what is retained.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.e2e.test_pulumi import Deployed
from trainer_infra.recovery import pending_operations
from trainer_infra.sandbox import leftovers
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.pulumi_stack import STACK, Result, diagnostics, installation, read_state_file
from trainer_infra.sandbox.render import bind_claims, render_stack
from trainer_infra.sandbox.versions import CHECKOUT

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
#: what the team wrote, which no recovery may touch
TEAM_DATA = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-notes", "namespace": "nlp"}}
#: the provider's server-side-apply field manager prefix (objects Pulumi wrote)
PULUMI_MANAGER = "pulumi-kubernetes"
KILL_WAIT = 900.0


@dataclass
class Stack(Deployed):
    """The shared stack of test_pulumi.py, plus the engine run in the background and killed."""

    outcomes: dict[str, Any] = field(default_factory=dict)
    #: ``<ns>/<pod>/<container>`` → restarts allowed from now on: those an API server outage caused
    restarts: dict[str, int] = field(default_factory=dict)

    @property
    def client(self) -> Any:
        return self.installed.sandbox.client

    # -- the engine in the background -----------------------------------------------------------------------
    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """``pulumi <args>`` in its own process group (the engine, the language host and the providers)."""
        cmd = [str(self.project.toolchain.pulumi), *args, "--non-interactive"]
        log = (self.project.workdir / f"bg-{len(self.project.results)}-{int(time.time())}.log").open("w")
        return subprocess.Popen(
            cmd,
            cwd=self.project.workdir,
            env={**self.project.env(), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def kill(self, proc: subprocess.Popen[str]) -> None:
        """SIGKILL the process group, and any plugin the engine started elsewhere (they name PULUMI_HOME)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for line in leftovers.processes_of(self.project.workdir / "home"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)

    def checkpoint(self) -> Obj:
        """The DIY backend's checkpoint file as it is now (read directly: the engine may be writing it)."""
        stacks = self.project.state_dir / ".pulumi" / "stacks"
        for path in [*stacks.rglob(f"{STACK}.json"), *stacks.rglob(f"{STACK}.json.zst")]:
            for _ in range(20):
                try:
                    doc: Obj = json.loads(read_state_file(path))
                    return doc.get("checkpoint", {}).get("latest") or {}
                except (ValueError, OSError):  # JSONDecodeError is a ValueError
                    time.sleep(0.1)
        return {}

    def kill_when(self, proc: subprocess.Popen[str], what: str, ready: Callable[[Obj], bool]) -> Obj:
        """Poll the checkpoint until ``ready``; then SIGKILL and return the checkpoint the kill left."""
        deadline = time.monotonic() + KILL_WAIT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended (exit {proc.returncode}) before {what}")
            if ready(self.checkpoint()):
                self.kill(proc)
                return self.checkpoint()
            time.sleep(0.2)
        self.kill(proc)
        raise AssertionError(f"not seen within {KILL_WAIT} s: {what}")

    def up_args(self) -> list[str]:
        """`up` as the deploy workflow runs it (the policy pack enforced)."""
        return ["up", "--yes", "--skip-preview", "--stack", STACK, "--policy-pack", str(self.project.policy_dir)]

    def recover(self, *extra: str) -> Result:
        """`trainer-infra recover` as docs/recovery.md runs it, with the policy pack for its `up`."""
        cmd = [sys.executable, "-m", "trainer_infra", "recover", "--stack", STACK, *extra]
        return self.project._exec(
            [*cmd, "--", "--policy-pack", str(self.project.policy_dir)], check=False, timeout=3600
        )

    # -- what must hold after every recovery --------------------------------------------------------------------
    def converged(self, step: str) -> None:
        """No pending operation; the preview shows no change; every object once in the state, every object
        Pulumi wrote in the cluster is in the state (no orphan, Helm-chart objects included)."""
        state = self.project.export()["deployment"]
        assert not state.get("pending_operations"), state.get("pending_operations")
        preview = self.timed(f"preview ({step})", self.project.preview("--expect-no-changes", check=False))
        assert preview.returncode == 0, diagnostics(preview.output)
        held, scoped = [], set()
        for resource in state["resources"]:
            if (key := _key(resource, self.namespaced)) is not None:
                held.append((key, resource["urn"]))
                if not key[1] and (written := resource["inputs"]["metadata"].get("namespace")):
                    scoped.add(f"{key[0]} {written}/{key[2]}")
        self.outcomes["cluster-scoped objects the state holds with a namespace"] = sorted(scoped)
        keys = Counter(key for key, _ in held)
        twice = [k for k, n in keys.items() if n > 1]
        assert not twice, f"objects held twice in the state: {twice}"
        orphans = [k for k in self.written_by_pulumi() if k not in keys]
        same_name = [urn for key, urn in held if any(key[0] == o[0] and key[2] == o[2] for o in orphans)]
        assert not orphans, (
            f"objects Pulumi wrote that the state does not hold: {orphans[:20]}; held by kind and name: {same_name}"
        )

    def namespaced(self, api_version: str, kind: str) -> bool:
        """The kind's scope as the API server serves it (a kind it does not serve: as the inputs say)."""
        try:
            return bool(self.client.resource(api_version, kind).namespaced)
        except ApiError:
            return True

    def controllers_healthy(self, step: str, outage: bool = False) -> None:
        """Every controller pod Ready on the real node and never OOM-killed; no restart, except those an API server
        outage causes (``outage``): a controller that cannot renew its leader lease exits ("leader election
        lost") and its pod restarts, as on any cluster. Those are counted, and allowed from then on, no more."""
        allowed = dict(self.restarts)
        if outage:
            allowed.update({k: 10**6 for k in self._containers()})

        def ready() -> bool:
            problems = self.sandbox.controller_problems(allowed)
            broken = [p for p in problems if "OOM" in p or "on node" in p or "restarted" in p]
            if broken:
                raise AssertionError(f"controller pods ({step}):\n" + "\n".join(broken))
            return not problems

        try:
            wait_for(f"the controller pods to be Ready ({step})", ready, 300)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.failure_context()}") from None
        if outage:
            self.restarts = self.restart_counts()
            lost = self.leader_election_lost()
            self.outcomes[f"controller restarts ({step})"] = {k: n for k, n in self.restarts.items() if n}
            self.outcomes[f"restarted after 'leader election lost' ({step})"] = lost

    def restart_counts(self) -> dict[str, int]:
        return {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}/{cs['name']}": int(cs.get("restartCount", 0))
            for p in self.sandbox.controller_pods()
            for cs in p.get("status", {}).get("containerStatuses", [])
        }

    def leader_election_lost(self) -> list[str]:
        """The restarted containers whose previous run ended on a lost leader lease (their log says so)."""
        found = []
        for pod in self.sandbox.controller_pods():
            meta = pod["metadata"]
            for cs in pod.get("status", {}).get("containerStatuses", []):
                if not cs.get("restartCount"):
                    continue
                with contextlib.suppress(ApiError):
                    log = self.client.log(meta["name"], meta["namespace"], cs["name"], previous=True, tail=40)
                    if "leader election lost" in log:
                        found.append(f"{meta['namespace']}/{meta['name']}/{cs['name']}")
        return found

    def written_by_pulumi(self) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of every object of the stack's kinds whose field managers include Pulumi."""
        found = []
        kinds = {(r["apiVersion"], r["kind"]) for r in self.render.objects} | {
            ("apps/v1", "Deployment"),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
            ("v1", "ServiceAccount"),
            ("v1", "Service"),
            ("rbac.authorization.k8s.io/v1", "ClusterRole"),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
        }
        for api_version, kind in sorted(kinds):
            try:
                items = self.client.list_all(api_version, kind)["items"]  # every namespace
            except ApiError:
                continue  # a kind whose CRD is not installed
            for obj in items:
                if _pulumi_managers(obj):
                    found.append((kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
        return found


def _key(resource: Obj, namespaced: Callable[[str, str], bool]) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of a state's Kubernetes object as the API server names it. A chart may give a
    cluster-scoped object a namespace (Kueue 0.19's webhook configurations carry ``namespace: kueue-system``); the
    provider keeps it in the inputs, the API server ignores it."""
    if not str(resource.get("type", "")).startswith("kubernetes:") or resource.get("delete"):
        return None
    inputs = resource.get("inputs") or {}
    meta = inputs.get("metadata") or {}
    if "kind" not in inputs or "name" not in meta:
        return None
    kind = str(inputs["kind"])
    namespace = str(meta.get("namespace") or "") if namespaced(str(inputs.get("apiVersion", "")), kind) else ""
    return kind, namespace, str(meta["name"])


def _pulumi_managers(obj: Obj) -> list[str]:
    """The object's Pulumi field managers: the provider names one per resource, at random, when it first checks it
    (``pulumi-kubernetes-<random>``, provider.go ``fieldManagerName``)."""
    managers = {m.get("manager", "") for m in obj["metadata"].get("managedFields", [])}
    return sorted(m for m in managers if m.startswith(PULUMI_MANAGER))


def _live(stack: Stack, checkpoint: Obj) -> dict[tuple[str, str, str], Obj]:
    """The objects of the checkpoint's pending creates that exist in the cluster."""
    found = {}
    for op in checkpoint.get("pending_operations") or []:
        inputs = (op.get("resource") or {}).get("inputs") or {}
        meta = inputs.get("metadata") or {}
        if op.get("type") != "creating" or "kind" not in inputs or "name" not in meta:
            continue
        try:
            obj = stack.client.get(inputs["apiVersion"], inputs["kind"], meta["name"], meta.get("namespace"))
        except ApiError:
            continue
        found[(inputs["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return found


def _live_uids(stack: Stack, checkpoint: Obj) -> dict[tuple[str, str, str], str]:
    """UIDs of the objects of the checkpoint's pending creates that exist in the cluster."""
    return {key: obj["metadata"]["uid"] for key, obj in _live(stack, checkpoint).items()}


def _pending(checkpoint: Obj, operation: str) -> list[str]:
    return [p.urn for p in pending_operations(checkpoint) if p.operation == operation]


def _team(name: str) -> Obj:
    return {
        "name": name,
        "quota": {"h100": {"gpus": 0}},
        "members": {"users": ["carol@example.com"]},
        "storage": {"size": "1Gi"},
    }


def _claim(stack: Stack, namespace: str) -> Obj:
    claim = dict(stack.render.of_kind("PersistentVolumeClaim")[0])
    claim["metadata"] = {"namespace": namespace, "name": claim["metadata"]["name"]}
    claim["spec"] = {**claim["spec"], "resources": {"requests": {"storage": "1Gi"}}}
    return claim


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    render = render_stack("local", tmp_path_factory.mktemp("render") / "out")
    base = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())
    with installation(tmp_path_factory.mktemp("pulumi-recovery"), base) as installed:
        found = Stack(installed, base, render)
        found.set_config()
        bind_claims(found.client, render.of_kind("PersistentVolumeClaim"))
        yield found
        found.report("recovery", found.outcomes)


def test_up_killed_while_the_charts_are_created_is_recovered(stack: Stack) -> None:
    proc = stack.start(
        "up", "--yes", "--skip-preview", "--stack", STACK, "--policy-pack", str(stack.project.policy_dir)
    )
    started = time.monotonic()
    left = stack.kill_when(
        proc,
        "a pending create of a chart object",
        lambda cp: any("helm.sh/v4:Chart" in urn for urn in _pending(cp, "creating")),
    )
    stack.outcomes["first up killed after (s)"] = round(time.monotonic() - started, 1)
    creates = _pending(left, "creating")
    stack.outcomes["pending creates left"] = len(creates)
    stack.outcomes["resources recorded at the kill"] = len(left.get("resources", []))
    assert creates, left.get("pending_operations")
    # the objects whose create was in flight and reached the cluster: adopted later, never deleted and recreated
    reached = _live_uids(stack, left)
    stack.outcomes["interrupted creates found in the cluster"] = len(reached)
    # what Pulumi says and refuses before the recovery: the report names each interrupted create
    report = stack.recover()
    assert report.returncode == 1, report.output[-3000:]
    for urn in creates:
        assert urn in report.output
    recovered = stack.timed("recover (first up killed)", stack.recover("--yes"))
    assert recovered.returncode == 0, recovered.output[-6000:]
    stack.timed("up --refresh (after the recovery)", stack.project.up("--refresh"))
    stack.converged("after the killed first up")
    adopted = {k: obj for k, obj in _live(stack, left).items() if k in reached}
    assert {k: obj["metadata"]["uid"] for k, obj in adopted.items()} == reached
    # the killed create's field manager stays beside the adopting one's (docs/recovery.md says what that means)
    stack.outcomes["Pulumi field managers of the adopted objects"] = {
        "/".join(k): _pulumi_managers(obj) for k, obj in adopted.items()
    }
    stack.controllers_healthy("after the killed first up")
    # the controllers serve: the charts are whole
    for ns in ("jobset-system", "kueue-system", "kubeflow-system"):
        assert stack.client.list("apps/v1", "Deployment", ns), ns
    stack.client.create({**TEAM_DATA, "data": {"written": "by the team"}})


def test_api_server_stopped_during_an_up_is_recovered(stack: Stack) -> None:
    sandbox = stack.installed.sandbox
    claim_uid = stack.client.get("v1", "PersistentVolumeClaim", _claim(stack, "nlp")["metadata"]["name"], "nlp")[
        "metadata"
    ]["uid"]
    stack.kept["teams"] = [*stack.base["config"]["trainer-platform:teams"], _team("e2e-api")]
    stack.set_config()
    # the new team's claim stays unbound until the API server is back: its create waits (a pending create)
    proc = stack.start(
        "up", "--yes", "--skip-preview", "--stack", STACK, "--policy-pack", str(stack.project.policy_dir)
    )
    deadline = time.monotonic() + KILL_WAIT
    while not any("e2e-api" in urn for urn in _pending(stack.checkpoint(), "creating")):
        assert proc.poll() is None, f"the up ended (exit {proc.returncode}) before creating the new team"
        assert time.monotonic() < deadline, "no pending create of the new team"
        time.sleep(0.2)
    apiserver = next(p for p in sandbox.processes if p.name == "kube-apiserver")
    stopped = time.monotonic()
    _stop(apiserver)
    sandbox.processes.remove(apiserver)
    try:
        proc.wait(timeout=240)
        stack.outcomes["up exit with the API server down"] = proc.returncode
    except subprocess.TimeoutExpired:
        stack.outcomes["up exit with the API server down"] = "still running after 240 s; killed"
        stack.kill(proc)
    stack.outcomes["API server down (s)"] = round(time.monotonic() - stopped, 1)
    sandbox._start_apiserver()
    bind_claims(stack.client, [_claim(stack, "e2e-api")])
    left = stack.checkpoint()
    stack.outcomes["pending after the API server outage"] = [p.operation for p in pending_operations(left)]
    recovered = stack.timed("recover (API server stopped)", stack.recover("--yes"))
    assert recovered.returncode == 0, recovered.output[-6000:]
    stack.timed("up --refresh (after the API server outage)", stack.project.up("--refresh"))
    stack.converged("after the API server outage")
    stack.controllers_healthy("API server stopped", outage=True)
    assert stack.client.get("v1", "Namespace", "e2e-api")
    # team data untouched: the team's claim is the same object, its notes still there
    assert (
        stack.client.get("v1", "PersistentVolumeClaim", _claim(stack, "nlp")["metadata"]["name"], "nlp")["metadata"][
            "uid"
        ]
        == claim_uid
    )
    assert stack.client.get("v1", "ConfigMap", "team-notes", "nlp")["data"] == {"written": "by the team"}


def _stop(proc: Any) -> None:
    from trainer_infra.sandbox.processes import terminate

    terminate(proc, grace=5)


def test_skip_checkpoints_loses_what_the_killed_up_did(stack: Stack) -> None:
    """``PULUMI_SKIP_CHECKPOINTS=true``: the engine writes the state only at the end. Killed, it leaves the state
    of the previous run: no pending operation either, so nothing tells the next `up` what exists."""
    before = stack.project.export()["deployment"]
    stack.kept["teams"] = [*stack.kept["teams"], _team("e2e-skip")]
    stack.set_config()
    proc = stack.start(*stack.up_args(), env={"PULUMI_SKIP_CHECKPOINTS": "true"})
    # its claim stays unbound: the run waits on it with the team's namespace and queues already created
    wait_for("the new team's claim to exist", lambda: _exists(stack, "PersistentVolumeClaim", "e2e-skip"), KILL_WAIT)
    stack.kill(proc)
    after = stack.project.export()["deployment"]
    created = [k for k in stack.written_by_pulumi() if k[1] == "e2e-skip" or k[2] == "e2e-skip"]
    recorded = [r["urn"] for r in after["resources"] if "e2e-skip" in r["urn"]]
    stack.outcomes["skip-checkpoints: objects created in the cluster"] = len(created)
    stack.outcomes["skip-checkpoints: of them recorded in the state"] = len(recorded)
    assert created and not recorded, (created, recorded)
    assert not after.get("pending_operations")
    assert len(after["resources"]) == len(before["resources"])
    bind_claims(stack.client, [_claim(stack, "e2e-skip")])
    uids = {
        "claim": _uid(stack, "PersistentVolumeClaim", "workspace", "e2e-skip"),
        "ns": _uid(stack, "Namespace", "e2e-skip"),
    }
    # the next plain `up` (after `pulumi cancel`: the killed run's lock) fails on each object the lost run created
    stack.project.run("cancel", "--yes", "--stack", STACK)
    failed = stack.timed("up (after a skip-checkpoints kill)", stack.project.up(check=False))
    assert failed.returncode != 0
    assert "already exists" in failed.output, diagnostics(failed.output)
    # `recover` finds nothing recorded; `--adopt-existing` adopts what the cluster holds, after a preview
    assert stack.recover().returncode == 0
    adopted = stack.timed("recover --adopt-existing", stack.recover("--yes", "--adopt-existing"))
    assert adopted.returncode == 0, adopted.output[-6000:]
    stack.timed("up --refresh (after the adoption)", stack.project.up("--refresh"))
    stack.converged("after the skip-checkpoints kill")
    stack.controllers_healthy("after the skip-checkpoints kill")
    # adopted, not recreated: the objects the lost run created are the same ones
    assert uids == {
        "claim": _uid(stack, "PersistentVolumeClaim", "workspace", "e2e-skip"),
        "ns": _uid(stack, "Namespace", "e2e-skip"),
    }


def _uid(stack: Stack, kind: str, name: str, namespace: str | None = None) -> str:
    return str(stack.client.get("v1", kind, name, namespace)["metadata"]["uid"])


def _exists(stack: Stack, kind: str, namespace: str) -> bool:
    return bool(stack.client.list("v1", kind, namespace))


def test_interrupted_teardown_destroy_is_finished_by_running_it_again(stack: Stack) -> None:
    client = stack.client
    stack.unprotect_for_teardown()
    resources = stack.project.export()["deployment"]["resources"]
    retained = {r["urn"] for r in resources if r.get("retainOnDelete")}
    proc = stack.start("destroy", "--yes", "--stack", STACK)
    left = stack.kill_when(proc, "a pending delete", lambda cp: bool(_pending(cp, "deleting")))
    stack.outcomes["destroy: resources left at the kill"] = len(left.get("resources", []))
    stack.outcomes["destroy: pending deletes"] = len(_pending(left, "deleting"))
    # docs/recovery.md: the killed run's lock, then the same command again
    stack.project.run("cancel", "--yes", "--stack", STACK)
    again = stack.timed("destroy (again, after the kill)", stack.project.destroy())
    assert again.returncode == 0
    state = stack.project.export()["deployment"]
    assert not [r for r in state.get("resources", []) if str(r["type"]).startswith("kubernetes:")], "left in state"
    left_behind = []
    for r in resources:
        inputs = r.get("inputs") or {}
        if not str(r["type"]).startswith("kubernetes:") or "kind" not in inputs or r["urn"] in retained:
            continue
        meta = inputs.get("metadata") or {}
        try:
            obj = client.get(inputs["apiVersion"], inputs["kind"], meta["name"], meta.get("namespace"))
        except ApiError as exc:
            if exc.status == 404:
                continue
            raise
        if "deletionTimestamp" not in obj["metadata"]:
            left_behind.append((inputs["kind"], meta.get("namespace", ""), meta["name"]))
    assert not left_behind, f"left in the cluster, not retained by design: {left_behind[:20]}"
