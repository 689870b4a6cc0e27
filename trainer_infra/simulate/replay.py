"""Replay a trace on a running control plane: submit each row as a TrainJob at its (compressed) time and
record what Kueue, JobSet and Trainer did with it.

Nothing here decides anything: admission, borrowing, preemption and fair sharing are the real Kueue's; the
replay only creates TrainJobs and watches Workloads and pods. A job's pods finish after the row's duration
because each pod carries its (compressed) duration in an annotation, which the control plane's kwok stage
`pod-complete-after-duration` turns into a delayed `Succeeded` (trainer_infra/sandbox/controlplane.py).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import urllib3

from trainer_infra.core.upstream import trainer
from trainer_infra.core.upstream.kueue import GROUP as KUEUE_GROUP
from trainer_infra.core.upstream.kueue import PRIORITY_LABEL, QUEUE_LABEL
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL, TRAINER_API_VERSION
from trainer_infra.sandbox.kube import ApiError, KubeClient
from trainer_infra.sandbox.kwok_stages import DURATION_ANNOTATION
from trainer_infra.sandbox.versions import VersionSet
from trainer_infra.simulate.facts import StackFacts
from trainer_infra.simulate.metrics import JobOutcome
from trainer_infra.simulate.trace import TraceRow
from trainer_infra.simulate.work import DEFAULT_CHECKPOINT_SECONDS, Admission, resume_point

Obj = dict[str, Any]
TRAINJOB = (TRAINER_API_VERSION, "TrainJob")
MANAGER = "trainer-platform.io/simulate"
SUBMIT_BATCH = 20
#: Passes of the replay loop (≥ 0.5 wall s apart) a job's shorter duration is retried before its pods keep the older
RESUME_TRIES = 60


def pod_accelerators(pod: Obj, resource: str) -> int:
    """The accelerators a pod's containers hold (their limits)."""
    total = 0
    for c in pod.get("spec", {}).get("containers", []):
        total += int(c.get("resources", {}).get("limits", {}).get(resource, "0"))
    return total


def trainjob(row: TraceRow, facts: StackFacts, compression: float) -> Obj:
    """The TrainJob of a trace row: the team's LocalQueue, its priority and runtime, and pods that carry the
    compressed duration for kwok."""
    team = facts.teams[row.team]
    labels = {QUEUE_LABEL: team.local_queue}
    if row.priority:
        labels[PRIORITY_LABEL] = row.priority
    runtime = row.runtime or facts.default_runtime
    return {
        "apiVersion": TRAINJOB[0],
        "kind": TRAINJOB[1],
        "metadata": {"name": str(row.name), "namespace": team.name, "labels": labels},
        "spec": {
            "runtimeRef": {"name": runtime, "apiGroup": trainer.GROUP, "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "numNodes": row.nodes,
                "resourcesPerNode": {
                    "limits": {facts.resource: str(row.accelerators)},
                    "requests": {facts.resource: str(row.accelerators)},
                },
            },
            "runtimePatches": [duration_patch(row, facts, row.duration / compression)],
        },
    }


def duration_patch(row: TraceRow, facts: StackFacts, wall_seconds: float) -> Obj:
    """Our entry of the TrainJob's `runtimePatches`: every pod carries how long it runs (kwok's stage delay).
    Trainer keys the entries by manager, so re-applying it changes ours only."""
    pod_meta = {"metadata": {"annotations": {DURATION_ANNOTATION: f"{wall_seconds:.3f}s"}}}
    runtime = row.runtime or facts.default_runtime
    return {
        "manager": MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": name, "template": {"spec": {"template": pod_meta}}}
                        for name in facts.replicated_jobs.get(runtime, ("node",))
                    ]
                }
            }
        },
    }


class Replay:
    """One replay of a trace on a running control plane."""

    def __init__(
        self,
        client: KubeClient,
        facts: StackFacts,
        rows: Sequence[TraceRow],
        compression: float,
        *,
        bound: float,
        sample_every: float = 2.0,
        progress: Callable[[str], None] = lambda _: None,
        versions: VersionSet | None = None,
        checkpoint: float = DEFAULT_CHECKPOINT_SECONDS,
    ) -> None:
        kueue_api = (versions or VersionSet()).api_version(KUEUE_GROUP)
        self.workload = (kueue_api, "Workload")
        self.cluster_queue = (kueue_api, "ClusterQueue")
        self.client = client
        self.facts = facts
        self.rows = list(rows)
        self.compression = compression
        self.bound = bound
        self.sample_every = sample_every
        self.progress = progress
        self.jobs: dict[str, JobOutcome] = {}
        self.row_of: dict[str, TraceRow] = {}
        for row in self.rows:
            key = f"{facts.teams[row.team].name}/{row.name}"
            self.row_of[key] = row
            self.jobs[key] = facts.outcome(row, checkpoint)
        #: job → the progress its TrainJob's pods resume from (what its duration annotation was last set to)
        self.resumes_from: dict[str, float] = {}
        #: jobs whose pods must be given a shorter duration before they run again: job → progress to resume from
        self.to_resume: dict[str, float] = {}
        #: re-admissions whose pods ran their whole last duration again (the resume reached them too late)
        self.resume_failures: list[str] = []
        self.resume_tries: dict[str, int] = {}
        self.samples: list[tuple[float, str, int]] = []
        self.stopped_early = ""
        self.start = 0.0
        self.ended = 0.0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.submit_lag = 0.0
        #: pod uid → trace time the replay saw it Running; the pods whose Succeeded it has counted
        self.running_since: dict[str, float] = {}
        self.counted: set[str] = set()
        #: the machine's 1-minute load average, every 30 wall seconds (how contended the replay was)
        self.load: list[float] = []

    def now(self) -> float:
        """Trace seconds since the replay started."""
        return (time.monotonic() - self.start) * self.compression

    # -- watchers ---------------------------------------------------------------
    def _on_workload(self, kind: str, wl: Obj) -> None:
        owners = wl["metadata"].get("ownerReferences", [])
        owner = next((o["name"] for o in owners if o.get("kind") == "TrainJob"), None)
        job = self.jobs.get(f"{wl['metadata'].get('namespace')}/{owner}") if owner else None
        if job is None:
            return
        conds = {c["type"]: c for c in wl.get("status", {}).get("conditions", [])}

        def true(kind: str) -> bool:
            return bool(conds.get(kind, {}).get("status") == "True")

        t = self.now()
        key = f"{wl['metadata'].get('namespace')}/{owner}"
        with self.lock:
            held = bool(job.admissions) and job.admissions[-1].end is None
            if true("Finished"):
                if held:
                    job.admissions[-1] = replace(job.admissions[-1], end=t, ended_by="finished")
                if job.finished is None:
                    job.finished = t
                return
            if true("Admitted") and not held:
                job.admissions.append(Admission(t, resumed_from=self.resumes_from.get(key, 0.0)))
                assignments = wl.get("status", {}).get("admission", {}).get("podSetAssignments", [])
                flavors = assignments[0].get("flavors", {}) if assignments else {}
                job.flavor = flavors.get(self.facts.resource, next(iter(flavors.values()), ""))
            elif held and not true("Admitted"):
                evicted, preempted = conds.get("Evicted", {}), conds.get("Preempted", {})
                reason = "/".join(r for r in (evicted.get("reason"), preempted.get("reason")) if r)
                job.admissions[-1] = replace(job.admissions[-1], end=t, ended_by="evicted", reason=reason or "unknown")
                resume = resume_point(job.admissions, job.duration, job.checkpoint, t)
                if resume != self.resumes_from.get(key, 0.0):
                    self.to_resume[key] = resume

    def _on_pod(self, kind: str, pod: Obj) -> None:
        """When each pod started running and how long it ran: what the trace's durations must add up to."""
        meta = pod["metadata"]
        name = meta.get("labels", {}).get(JOBSET_NAME_LABEL)
        job = self.jobs.get(f"{meta.get('namespace')}/{name}") if name else None
        if job is None:
            return
        phase, uid = pod.get("status", {}).get("phase"), meta.get("uid", "")
        t = self.now()
        with self.lock:
            if phase == "Running" and uid not in self.running_since:
                self.running_since[uid] = t
                if job.started is None:
                    job.started = t
                last = job.admissions[-1] if job.admissions else None
                if last is not None and last.end is None and last.running is None:
                    job.admissions[-1] = replace(last, running=t)
            elif phase == "Succeeded" and uid in self.running_since and uid not in self.counted:
                self.counted.add(uid)
                job.pod_runs.append((self.running_since[uid], t, pod_accelerators(pod, self.facts.resource)))

    def _watch(self, api: tuple[str, str], handle: Callable[[str, Obj], None]) -> None:
        """List then watch one kind across namespaces until stopped; re-list when the watch expires."""
        while not self.stop_event.is_set():
            try:
                listing = self.client.list_all(*api)
                for item in listing["items"]:
                    handle("ADDED", item)
                version = listing["metadata"]["resourceVersion"]
                for kind, obj in self.client.watch(*api, resource_version=version, stop=self.stop_event):
                    handle(kind, obj)
            except (ApiError, OSError, ValueError, urllib3.exceptions.HTTPError) as exc:
                if self.stop_event.is_set():
                    return
                self.progress(f"watch of {api[1]} restarted: {exc}")
                time.sleep(0.5)

    def _resume(self) -> None:
        """Give each evicted job's pods the work left after its last checkpoint, before Kueue admits it again.

        Trainer 2.2.1 takes a change of `runtimePatches` only while the TrainJob is suspended and its JobSet has
        no active pod (`checkRuntimePatchesImmutability`, pkg/runtime/framework/plugins/jobset/jobset.go), and
        builds the suspended JobSet again from it; JobSet 0.12.0 lets a suspended JobSet's pod template
        annotations change (pkg/webhooks/jobset_webhook.go). Until both hold the patch is refused and retried;
        a job admitted again before it lands runs the older duration, which its next admission records."""
        with self.lock:
            waiting = list(self.to_resume.items())
        for key, resume in waiting:
            row, namespace = self.row_of[key], key.split("/", 1)[0]
            patch = {
                "apiVersion": TRAINJOB[0],
                "kind": TRAINJOB[1],
                "metadata": {"name": str(row.name), "namespace": namespace},
                "spec": {
                    "runtimePatches": [duration_patch(row, self.facts, (row.duration - resume) / self.compression)]
                },
            }
            try:
                self.client.apply(patch, field_manager=MANAGER)
            except (ApiError, OSError, urllib3.exceptions.HTTPError) as exc:
                tries = self.resume_tries[key] = self.resume_tries.get(key, 0) + 1
                message = exc.message if isinstance(exc, ApiError) else str(exc)
                running_again = "suspended" in message and "active" not in message
                if running_again or tries >= RESUME_TRIES:
                    # the pods run the older duration, which the admission records; the metrics count the rerun
                    self.progress(f"{key}: not resumed from its checkpoint at {resume:.0f} s: {message[:200]}")
                    with self.lock:
                        if self.to_resume.get(key) == resume:
                            del self.to_resume[key]
                            self.resume_failures.append(key)
                continue  # its JobSet still had active pods, or the API server was busy: a later pass retries
            self.resume_tries.pop(key, None)
            with self.lock:
                self.resumes_from[key] = resume
                if self.to_resume.get(key) == resume:
                    del self.to_resume[key]
                job = self.jobs[key]
                last = job.admissions[-1] if job.admissions else None
                if last is not None and last.end is None and last.running is None:
                    # admitted before the patch landed, but still suspended then: its pods get the new duration
                    job.admissions[-1] = replace(last, resumed_from=resume)

    def _sample(self) -> None:
        """Accelerators each ClusterQueue has reserved, read from its status (the conservation check's input)."""
        for cq in self.client.list_all(*self.cluster_queue)["items"]:
            held = 0
            for flavor in cq.get("status", {}).get("flavorsReservation", []):
                for res in flavor.get("resources", []):
                    if res["name"] == self.facts.resource:
                        held += int(res.get("total", "0"))
            self.samples.append((self.now(), cq["metadata"]["name"], held))

    # -- the run ----------------------------------------------------------------
    def run(self) -> list[JobOutcome]:
        """Submit every row at its time and wait until all finished, the bound is reached or Ctrl-C."""
        self.start = time.monotonic()
        watchers = [
            threading.Thread(target=self._watch, args=(self.workload, self._on_workload), daemon=True),
            threading.Thread(target=self._watch, args=(("v1", "Pod"), self._on_pod), daemon=True),
        ]
        for w in watchers:
            w.start()
        deadline = self.start + self.bound
        pending = list(self.rows)
        next_sample = next_resume = 0.0
        last_note = time.monotonic()
        done = False
        try:
            while True:
                wall = time.monotonic()
                # at most SUBMIT_BATCH creations per pass: when the API server falls behind the trace, the
                # bound, the samples and the progress lines still get their turn
                batch = 0
                while pending and pending[0].submit / self.compression <= wall - self.start and batch < SUBMIT_BATCH:
                    batch += 1
                    row = pending.pop(0)
                    key = f"{self.facts.teams[row.team].name}/{row.name}"
                    self.jobs[key].created = self.now()
                    self.submit_lag = max(self.submit_lag, self.now() - row.submit)
                    try:
                        self.client.create(trainjob(row, self.facts, self.compression))
                    except ApiError as exc:  # a webhook or policy of the stack refused it: reported, not waited on
                        self.jobs[key].never_admissible = f"refused when created: {exc.message[:300]}"
                        self.jobs[key].created = None
                if self.to_resume and wall >= next_resume:
                    self._resume()
                    next_resume = time.monotonic() + 0.5
                wall = time.monotonic()
                if wall >= next_sample:
                    self._sample()
                    next_sample = wall + self.sample_every
                if not pending:  # (before that, not done: no need to look at every job 20 times a second)
                    with self.lock:
                        done = all(j.finished is not None or j.never_admissible for j in self.jobs.values())
                if done:
                    break
                if wall >= deadline:
                    left = sum(1 for j in self.jobs.values() if j.finished is None)
                    self.stopped_early = (
                        f"the bound of {self.bound:.0f} wall seconds was reached with {left} of {len(self.jobs)} "
                        "jobs unfinished; the report covers what was measured until then"
                    )
                    break
                if wall - last_note >= 30:
                    last_note = wall
                    self.load.append(os.getloadavg()[0])
                    with self.lock:
                        finished = sum(1 for j in self.jobs.values() if j.finished is not None)
                    self.progress(
                        f"{wall - self.start:.0f} s: {finished}/{len(self.jobs)} jobs finished, "
                        f"load average {self.load[-1]:.1f}"
                    )
                if batch < SUBMIT_BATCH:
                    time.sleep(0.05)
        except KeyboardInterrupt:
            self.stopped_early = "interrupted (Ctrl-C); the report covers what was measured until then"
        finally:
            self.ended = self.now()
            self._sample()
            self.stop_event.set()
        return list(self.jobs.values())
