"""Deputies: identities that run pods in a team namespace, or act there, with rights a member does not have,
and the member-controlled fields that reach them. The inventory is data: docs/teams.md shows it, the tests
hold it against the render (every ServiceAccount bound in a team namespace is listed, and every listed one
is rendered) and the admission rules are written from it.

What reaches which job was read in Trainer 2.2.1/2.3.0 (`pkg/runtime/framework/plugins/jobset/builder.go`,
`pkg/runtime/core/trainingruntime.go`): `initializer.dataset.*` goes into the container named
`dataset-initializer` of the replicated job labelled `trainer.kubeflow.org/trainjob-ancestor-step:
dataset-initializer` (storageUri as STORAGE_URI, env upserted over the runtime's, secretRef as envFrom);
`initializer.model.*` likewise for `model-initializer`; `trainer.image/command/args/env` into the container
`node` of the job labelled `...ancestor-step: trainer`; runtime patches are strategic-merged into the
runtime's JobSet template (any replicated job by name: its labels, pod metadata, ServiceAccount, volumes,
containers' env, mounts and securityContext, scheduling), and the labels and annotations of a patch's
`template.metadata` are propagated to what Trainer creates. So the step label decides which job receives a
member's image: a patch that moves it to the cache initializer's job would run the member's image as that
ServiceAccount.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer_infra.admission.model import CacheDeputy
from trainer_infra.core.upstream import trainer
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.datacache.pinned import CACHE_INITIALIZER, CACHE_SUFFIX, IMAGE_ENV, PINNED_ENV, SERVICE_SUFFIX
from trainer_infra.datacache.rbac import CACHE_ROLE, CACHE_RULES
from trainer_infra.manifests.pod_walk import containers
from trainer_infra.manifests.runtime import get_in, replicated_jobs

#: Trainer's step label: which replicated job receives `initializer.*` and `trainer.*`.
STEP_LABEL = trainer.ANCESTOR_LABEL
INITIALIZER_JOBS = ("dataset-initializer", "model-initializer")
#: Why the cache cluster is not charged in Kueue: cache.py sets no queue label and makes the TrainJob the
#: LeaderWorkerSet's controller, and Kueue 0.19 defaults no LocalQueue for an object whose controller it
#: manages (`jobframework/defaults.go`, `defaultLocalQueueApplies`). It is bounded instead: one per TrainJob
#: (its name and controller), the pinned size and resources, and it exists only while an admitted TrainJob's
#: initializer runs; `teams[].resourceQuota` counts its pods against the namespace.
CACHE_CLUSTER_CHARGE = (
    "not charged in Kueue (cache.py sets no queue label; Kueue defaults none under a TrainJob it manages): "
    "one per TrainJob, pinned size and resources; teams[].resourceQuota counts it"
)


@dataclass(frozen=True)
class MemberField:
    """A member-controlled field, how it reaches the deputy, and what holds it."""

    field: str
    reaches: str
    bound: str


@dataclass(frozen=True)
class Deputy:
    """One identity that acts in team namespaces with rights a member does not have."""

    identity: str  # the ServiceAccount (or the pattern of its name)
    where: str
    runs: str
    may: str
    fields: tuple[MemberField, ...]
    #: the ClusterRole bound to it in every team namespace (None: no binding in the render)
    role: str | None = None


def cache_deputy(cfg: DataCacheConfig, runtimes: Iterable[Mapping[str, Any]]) -> CacheDeputy | None:
    """The cache deputy's facts from the served runtimes (after overrides, injections and the mirror)."""
    if not cfg.enabled:
        return None
    names: set[str] = set()
    jobs: set[str] = set()
    images: set[str] = set()
    env_names: set[str] = set()
    pinned: dict[str, str] = {}
    for rt in runtimes:
        for job in replicated_jobs(rt):
            pod = get_in(job, "template", "spec", "template", "spec")
            if not isinstance(pod, dict) or pod.get("serviceAccountName") != CACHE_INITIALIZER:
                continue
            names.add(str(rt["metadata"]["name"]))
            jobs.add(str(job["name"]))
            for _, c in containers(pod):
                images.add(str(c["image"]))
                env_names.update(str(e["name"]) for e in c.get("env") or [])
                pinned.update({e["name"]: str(e["value"]) for e in c.get("env") or [] if e.get("name") in PINNED_ENV})
    cluster = cfg.cluster
    return CacheDeputy(
        service_account=CACHE_INITIALIZER,
        runtimes=tuple(sorted(names)),
        jobs=tuple(sorted(jobs)),
        initializer_images=tuple(sorted(images)),
        initializer_env=tuple(sorted(env_names)),
        pinned=tuple(sorted(pinned.items())),
        cache_image=pinned.get(IMAGE_ENV, ""),
        size=cluster.size,
        head=(cluster.head_cpu, cluster.head_memory),
        worker=(cluster.worker_cpu, cluster.worker_memory),
        iam_role=cluster.iam_role,
    )


def _verbs() -> str:
    return "; ".join(
        f"{', '.join(r['verbs'])} {', '.join(r['resources'])}" for r in CACHE_RULES if r["resources"] != ["trainjobs"]
    )


CACHE_INITIALIZER_DEPUTY = Deputy(
    identity=CACHE_INITIALIZER,
    where="every team namespace (dataCache.enabled)",
    runs="the dataset-initializer pod of the data cache runtimes (torch-distributed-with-cache)",
    may=f"get its TrainJob; {_verbs()} (ClusterRole {CACHE_ROLE}, bound per namespace)",
    role=CACHE_ROLE,
    fields=(
        MemberField(
            "spec.initializer.dataset.env",
            "upserted over the runtime's env of the dataset-initializer container",
            f"names allow-listed (METADATA_LOC; the pinned {', '.join(PINNED_ENV)} only with the platform's value); "
            "PYTHON*, LD_*, STORAGE_URI, GPU selection and every other name refused",
        ),
        MemberField(
            "spec.initializer.dataset.storageUri",
            "env STORAGE_URI (selects the initializer's code path)",
            "must be cache://<schema>/<table> on a data cache runtime",
        ),
        MemberField(
            "spec.initializer.dataset.secretRef",
            "envFrom of the dataset-initializer container (any variable the Secret holds)",
            "refused on every runtime (initializerSecrets: the initializers hold the team token)",
        ),
        MemberField(
            "spec.runtimePatches[].…replicatedJobs[dataset-initializer]",
            "strategic-merged into the initializer's job: labels, pod metadata, ServiceAccount, volumes, "
            "containers (env, mounts, securityContext), scheduling",
            f"only nodeSelector, affinity, tolerations; {trainer.GROUP}/* labels refused in every patch",
        ),
        MemberField(
            "spec.runtimePatches[].trainingRuntimeSpec.template.metadata",
            "labels and annotations propagated to what Trainer creates",
            f"{trainer.GROUP}/* refused; AppArmor annotations judged as Pod Security does",
        ),
        MemberField(
            "spec.trainer.image/command/args/env",
            "only the `node` container of the job with step label `trainer` (a patch moving the label would "
            "move them into the initializer's job)",
            "step labels refused in patches; pods running as this account must run the pinned initializer image",
        ),
        MemberField("metadata.name", "TRAIN_JOB_NAME (names the objects cache.py creates)", "a DNS label (API server)"),
    ),
)

CACHE_CLUSTER_DEPUTY = Deputy(
    identity=f"<trainjob>{CACHE_SUFFIX}",
    where="team namespaces where a cache job runs (created by the cache initializer, owned by the TrainJob)",
    runs=f"the cache cluster: a LeaderWorkerSet (head + workers) and the Service <trainjob>{SERVICE_SUFFIX}",
    may="no Kubernetes rights (nothing binds it); the cloud role of dataCache.cluster.iamRole (IRSA annotation)",
    fields=(
        MemberField(
            f"{', '.join(PINNED_ENV)} (initializer env)",
            "image, size, resources of the cache pods and the role annotation of their ServiceAccount",
            "pinned in the runtime from dataCache (member may only repeat them); the LeaderWorkerSet, Service "
            "and ServiceAccount are refused unless they match what cache.py creates with those values",
        ),
        MemberField(
            "METADATA_LOC, spec.initializer.dataset.storageUri",
            "env METADATA_LOC, SCHEMA_NAME, TABLE_NAME of the cache pods (which data, not which code)",
            "allowed: data selection only",
        ),
        MemberField(
            "a TrainJob on the cache runtime",
            "one cache cluster, created by its initializer once Kueue admitted the TrainJob",
            CACHE_CLUSTER_CHARGE,
        ),
    ),
)

JOB_IDENTITIES = Deputy(
    identity="default and teams[].jobServiceAccounts",
    where="every team namespace",
    runs="the TrainJob's own pods (trainer, non-cache initializers)",
    may="nothing in Kubernetes from the platform (no binding); cloud rights you attach are the team's",
    fields=(
        MemberField(
            "everything a member sets",
            "the member's own pods",
            "the pod rules (volumes, host access, privileges, priority classes, GPU selection, Pod Security)",
        ),
    ),
)

CONTROLLERS = Deputy(
    identity="Trainer, JobSet, Kueue, LeaderWorkerSet and the Job/StatefulSet controllers",
    where="cluster-wide (their charts' ClusterRoles)",
    runs="nothing in team namespaces themselves: they create JobSets, Jobs, StatefulSets and Pods there",
    may="create every object of their kind in any namespace",
    fields=(
        MemberField(
            "TrainJob spec (Trainer), JobSet spec (JobSet), LeaderWorkerSet spec (LWS)",
            "copied into the objects and pods they create",
            "the same rules again on JobSets, LeaderWorkerSets and every Pod of a team namespace, whoever "
            "creates it: ServiceAccount, priority class, queue, volumes, host access, GPU selection",
        ),
    ),
)

MEMBER_SERVICE_ACCOUNTS = "teams[].members.serviceAccounts"


def inventory(data_cache: bool) -> tuple[Deputy, ...]:
    """Every identity acting in team namespaces beside the members (the cache ones only with the data cache)."""
    cache = (CACHE_INITIALIZER_DEPUTY, CACHE_CLUSTER_DEPUTY) if data_cache else ()
    return (*cache, JOB_IDENTITIES, CONTROLLERS)


def bound_in_team_namespaces(data_cache: bool) -> dict[str, str]:
    """ServiceAccount → ClusterRole it is bound to in every team namespace (the render must match)."""
    return {d.identity: d.role for d in inventory(data_cache) if d.role is not None}
