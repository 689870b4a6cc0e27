"""`trainer-infra fleet redispatch`: dispatch again the TrainJobs a lost worker stranded on a MultiKueue manager.

Kueue 0.19.2 evicts a lost worker's workloads on the manager after `workerLostTimeout`, but never dispatches them
again: the manager's TrainJob keeps the `status.jobsStatus` MultiKueue copied from the worker (`active: 1`), so
Kueue's job reconciler finds the job "still active", waits for it to stop, and keeps the Workload's quota
reservation forever; nothing on the manager runs the job, so nothing ever clears that status (the manager runs no
Trainer controller, and the worker that would send a new status is gone). Upstream: the mechanism of
kubernetes-sigs/kueue#15682 (open, in no release), reported for RayJob in kueue#15380.

The recovery is what Trainer itself does to a suspended TrainJob on a cluster that runs it: its jobs' status says
none is active. With that, Kueue finishes the eviction, releases the quota and requeues the same Workload, which
MultiKueue dispatches to a worker that can take it; the TrainJob (name, UID, spec, labels) is the member's, untouched.

A Workload is stranded only when all of these hold, so the command never touches a job Kueue is handling:
its TrainJob is MultiKueue's (`spec.managedBy`), suspended, and its copied status still counts active jobs; the
Workload is `Evicted`, still `QuotaReserved` (and still `Admitted`, as Kueue 0.19.2 leaves it), not `Finished`,
and evicted for at least `min_age`.
Deciding is pure (`find_stranded`); `cmd_redispatch` reads the manager and patches.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from trainer_infra.core.upstream import kueue, trainer
from trainer_infra.versions import MATRIX

Obj = dict[str, Any]
MULTIKUEUE = kueue.MULTIKUEUE_CONTROLLER
# the versions the default releases serve (the matrix): the command reads the live manager
KUEUE_GROUP, KUEUE_VERSION = kueue.GROUP, MATRIX.components["kueue"].default_release.api_versions[kueue.GROUP]
TRAINER_GROUP = trainer.GROUP
TRAINER_VERSION = MATRIX.components["trainer"].default_release.api_versions[trainer.GROUP]
#: the status a suspended TrainJob has on a cluster that runs Trainer: no child job active
CLEARED: Obj = {"status": {"jobsStatus": None}}


@dataclass(frozen=True)
class Stranded:
    namespace: str
    trainjob: str
    uid: str
    workload: str
    evicted_at: datetime
    reason: str  # the Evicted condition's message

    def line(self) -> str:
        at = f"{self.evicted_at:%Y-%m-%dT%H:%M:%SZ}"
        return f"{self.namespace}/{self.trainjob} (Workload {self.workload}, evicted {at})"


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c.get("type") == kind), None)


def _true(obj: Obj, kind: str) -> bool:
    return (_condition(obj, kind) or {}).get("status") == "True"


def _active_jobs(trainjob: Obj) -> int:
    return sum(int(j.get("active") or 0) for j in trainjob.get("status", {}).get("jobsStatus") or [])


def _owner(workload: Obj) -> str | None:
    for ref in workload["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "TrainJob" and ref.get("apiVersion", "").startswith(f"{TRAINER_GROUP}/"):
            return str(ref["name"])
    return None


def find_stranded(workloads: list[Obj], trainjobs: list[Obj], now: datetime, min_age: timedelta) -> list[Stranded]:
    """The stranded Workloads among `workloads` (any namespaces), with their TrainJobs from `trainjobs`."""
    by_name = {(t["metadata"]["namespace"], t["metadata"]["name"]): t for t in trainjobs}
    found = []
    for wl in workloads:
        ns, owner = wl["metadata"]["namespace"], _owner(wl)
        job = by_name.get((ns, owner)) if owner else None
        evicted = _condition(wl, "Evicted")
        if job is None or evicted is None or evicted.get("status") != "True":
            continue
        if not _true(wl, "QuotaReserved") or _true(wl, "Finished"):
            continue
        spec = job.get("spec", {})
        if spec.get("managedBy") != MULTIKUEUE or spec.get("suspend") is not True or _active_jobs(job) == 0:
            continue
        at = datetime.fromisoformat(str(evicted["lastTransitionTime"]).replace("Z", "+00:00"))
        if now - at < min_age:
            continue
        meta = job["metadata"]
        found.append(Stranded(ns, meta["name"], meta["uid"], wl["metadata"]["name"], at, evicted.get("message", "")))
    return sorted(found, key=lambda s: (s.namespace, s.trainjob))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="the manager's kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="the manager's context in it (default: the current context)")
    p.add_argument("--namespace", "-n", help="only this namespace (default: every namespace)")
    p.add_argument(
        "--min-age",
        type=int,
        default=60,
        metavar="SECONDS",
        help="only Workloads evicted at least this long ago (default: %(default)s; Kueue stops a job it can within "
        "seconds)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the stranded TrainJobs, change nothing")


def cmd_redispatch(args: argparse.Namespace) -> int:
    """Exit 0: nothing stranded, or every stranded job requeued (listed, with --dry-run); 1: a patch failed; 2: the
    manager could not be read."""
    from kubernetes import client, config
    from urllib3.exceptions import HTTPError

    where = f"{args.kubeconfig or '$KUBECONFIG'}{f' context {args.context}' if args.context else ''}"
    try:
        api = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
        custom = client.CustomObjectsApi(api)

        def items(group: str, version: str, plural: str) -> list[Obj]:
            if args.namespace:
                listed = custom.list_namespaced_custom_object(group, version, args.namespace, plural)
            else:
                listed = custom.list_cluster_custom_object(group, version, plural)
            return list(listed.get("items") or [])

        workloads = items(KUEUE_GROUP, KUEUE_VERSION, "workloads")
        trainjobs = items(TRAINER_GROUP, TRAINER_VERSION, "trainjobs")
    except (config.ConfigException, client.ApiException, HTTPError, OSError) as exc:
        print(f"cannot read the manager's Workloads and TrainJobs ({where}): {exc}", file=sys.stderr)
        return 2
    stranded = find_stranded(workloads, trainjobs, datetime.now(UTC), timedelta(seconds=args.min_age))
    if not stranded:
        print("no stranded TrainJob on this manager")
        return 0
    failed = 0
    for s in stranded:
        if args.dry_run:
            print(f"stranded: {s.line()}: {s.reason}")
            continue
        try:
            custom.patch_namespaced_custom_object_status(
                TRAINER_GROUP, TRAINER_VERSION, s.namespace, "trainjobs", s.trainjob, CLEARED
            )
        except (client.ApiException, HTTPError) as exc:
            failed += 1
            print(f"failed: {s.line()}: {exc}", file=sys.stderr)
            continue
        print(f"requeued: {s.line()}")
    return 1 if failed else 0
