"""The field table: every field of the v1 job kinds → where it goes in a TrainJob, or why it cannot.

One entry per field pattern. A pattern is a dotted path in which `{replicas}` stands for the kind's replica
specs field (`pytorchReplicaSpecs`, …), `*` for a replica type (`Master`, `Worker`, …) and `[]` for a list
item. An entry covers its field and everything below it. A unit test (`test_mapping_complete`) walks the
upstream v1 CRD schemas and ObjectMeta and fails on any field no entry covers (and on entries naming fields
that do not exist); the converter reports a field it meets without an entry as an unknown field, so nothing
is dropped silently. The docs page's table is generated from this table.

Dispositions:
- MAPPED: carried into the TrainJob at `target` (by `convert`).
- SUPERSEDED: the runtime or the platform provides it; noted, nothing to decide. With `keeps`, only those
  values are superseded; any other value is LOSSY.
- LOSSY: v2 has no place for it; reported and the job refused unless `--allow-lossy` names the field.
  Values in `keeps` (and empty/false values) lose nothing and are not reported.
- TENANCY: refused by the platform's tenancy rules when set (see `tenancy`); never overridable.
- OBSERVED: written by the API server or the controller (status, uid, …); not part of the job's intent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from trainer_infra.core.upstream.kubernetes import LAST_APPLIED
from trainer_infra.core.upstream.kueue import MULTIKUEUE_CONTROLLER, PRIORITY_LABEL, QUEUE_LABEL
from trainer_infra.manifests.runtime import TRAINER_API_VERSION


class Disposition(Enum):
    MAPPED = "mapped"
    SUPERSEDED = "superseded"
    LOSSY = "reported"
    TENANCY = "refused"
    OBSERVED = "observed"


@dataclass(frozen=True)
class Entry:
    pattern: str
    disposition: Disposition
    target: str = ""  # TrainJob field (MAPPED) or the runtime/platform part that supersedes it
    why: str = ""
    keeps: tuple[Any, ...] = ()  # values that lose nothing when dropped
    kinds: tuple[str, ...] = ()  # only for these kinds (default: every kind that has the field)
    since: str = ""  # MAPPED only from this Trainer version; LOSSY before it


M, S, L, T, SERVER = (
    Disposition.MAPPED,
    Disposition.SUPERSEDED,
    Disposition.LOSSY,
    Disposition.TENANCY,
    Disposition.OBSERVED,
)
POD = "spec.{replicas}.*.template.spec"
CONTAINER = f"{POD}.containers[]"
PATCH = "spec.runtimePatches[manager=trainer-platform.io/migrate].trainingRuntimeSpec.template.spec.replicatedJobs[]"
POD_PATCH = f"{PATCH}.template.spec.template.spec"
NODE_PATCH = f"{POD_PATCH}.containers[name=node]"
NOT_NEEDED_SERVER = "set by the API server; the TrainJob gets its own"


def _unpatchable(prefix: str, *fields: str) -> tuple[Entry, ...]:
    """Fields runtimePatches cannot carry, reported as lost (LOSSY) with the same reason."""
    return tuple(
        Entry(f"{prefix}.{f}", Disposition.LOSSY, why="not expressible through runtimePatches") for f in fields
    )


ENTRIES: tuple[Entry, ...] = (
    # --- the object ------------------------------------------------------------------------------
    Entry("apiVersion", M, "apiVersion", f"{TRAINER_API_VERSION}; the source is recorded in an annotation"),
    Entry("kind", M, "kind", "TrainJob; the source kind is recorded in an annotation"),
    Entry("metadata.name", M, "metadata.name"),
    Entry("metadata.namespace", M, "metadata.namespace", "must be a team namespace of the stack"),
    Entry(
        "metadata.labels",
        M,
        "metadata.labels",
        f"{QUEUE_LABEL} and {PRIORITY_LABEL} are checked against the stack",
    ),
    Entry(
        "metadata.annotations",
        M,
        "metadata.annotations",
        f"except {LAST_APPLIED}, which kubectl rewrites",
    ),
    Entry("metadata.generateName", L, why="the TrainJob needs a fixed name (the output is one file per job)"),
    Entry("metadata.ownerReferences", L, why="the TrainJob would not be garbage-collected with the owner"),
    Entry("metadata.finalizers", L, why="a finalizer's controller watches the v1 kind, not TrainJobs"),
    Entry("metadata.uid", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.resourceVersion", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.generation", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.creationTimestamp", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.deletionTimestamp", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.deletionGracePeriodSeconds", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.managedFields", SERVER, why=NOT_NEEDED_SERVER),
    Entry("metadata.selfLink", SERVER, why=NOT_NEEDED_SERVER),
    Entry("status", SERVER, why="observed state of the v1 job; the TrainJob starts fresh"),
    # --- run policy --------------------------------------------------------------------------------
    Entry("spec.runPolicy.activeDeadlineSeconds", M, "spec.activeDeadlineSeconds"),
    Entry("spec.runPolicy.suspend", M, "spec.suspend", "Kueue suspends and admits it either way"),
    Entry(
        "spec.runPolicy.managedBy",
        M,
        "spec.managedBy",
        f"{MULTIKUEUE_CONTROLLER} is kept; the v1 operators' own names are superseded by the Trainer controller",
    ),
    Entry(
        "spec.runPolicy.schedulingPolicy.queue",
        M,
        f"metadata.labels[{QUEUE_LABEL}]",
        "must name a LocalQueue of the stack in the job's namespace",
    ),
    Entry(
        "spec.runPolicy.schedulingPolicy.priorityClass",
        M,
        f"metadata.labels[{PRIORITY_LABEL}]",
        "must name a WorkloadPriorityClass of the stack",
    ),
    Entry(
        "spec.runPolicy.schedulingPolicy.minAvailable",
        L,
        why="gang size: Kueue admits all of a TrainJob's pods at once, a partial gang is not expressible",
    ),
    Entry("spec.runPolicy.schedulingPolicy.minResources", L, why="Volcano/scheduler-plugins gang resources"),
    Entry(
        "spec.runPolicy.schedulingPolicy.scheduleTimeoutSeconds",
        L,
        why="gang timeout: Kueue's waitForPodsReady is a cluster setting",
    ),
    Entry(
        "spec.runPolicy.cleanPodPolicy",
        L,
        keeps=("None",),
        why="v2 keeps finished pods until the TrainJob is deleted (as None)",
    ),
    Entry("spec.runPolicy.ttlSecondsAfterFinished", L, why="TrainJob has no TTL; delete finished jobs yourself"),
    Entry("spec.runPolicy.backoffLimit", L, why="restarts are the runtime's JobSet failurePolicy"),
    # --- per kind ----------------------------------------------------------------------------------
    Entry(
        "spec.nprocPerNode",
        M,
        "spec.trainer.numProcPerNode",
        "an integer is kept; auto is the torch runtime's default; gpu/cpu are reported",
        kinds=("PyTorchJob",),
    ),
    Entry(
        "spec.elasticPolicy",
        L,
        kinds=("PyTorchJob", "PaddleJob"),
        why="elastic training was removed from the v2 torch policy (Trainer 2.2)",
    ),
    Entry("spec.slotsPerWorker", M, "spec.trainer.numProcPerNode", kinds=("MPIJob",)),
    Entry(
        "spec.cleanPodPolicy",
        L,
        keeps=("None",),
        kinds=("MPIJob",),
        why="v2 keeps finished pods until the TrainJob is deleted (as None)",
    ),
    Entry(
        "spec.mainContainer",
        S,
        "the training container",
        kinds=("MPIJob",),
        why="names the launcher container that becomes the runtime's node container",
    ),
    Entry(
        "spec.runLauncherAsWorker",
        S,
        "mlPolicy.mpi.runLauncherAsNode",
        kinds=("MPIJob",),
        why="the runtime runs the launcher as node 0; true adds the launcher to numNodes (it was a worker)",
    ),
    Entry(
        "spec.sshAuthMountPath",
        S,
        "mlPolicy.mpi.sshAuthMountPath",
        kinds=("MPIJob",),
        why="the runtime's SSH mount path applies",
    ),
    Entry(
        "spec.launcherCreationPolicy",
        L,
        keeps=("AtStartup",),
        kinds=("MPIJob",),
        why="Trainer creates the launcher at startup",
    ),
    Entry(
        "spec.mpiImplementation", L, keeps=("OpenMPI",), kinds=("MPIJob",), why="the catalog's MPI runtimes use OpenMPI"
    ),
    Entry("spec.successPolicy", L, keeps=("",), kinds=("TFJob",), why="the runtime's JobSet successPolicy applies"),
    Entry("spec.enableDynamicWorker", L, kinds=("TFJob",), why="no dynamic workers in v2"),
    # --- replica specs -----------------------------------------------------------------------------
    Entry(
        "spec.{replicas}.*.replicas",
        M,
        "spec.trainer.numNodes",
        "the sum over the replica types that become training nodes (MPI: the workers; the launcher runs as node 0)",
    ),
    Entry(
        "spec.{replicas}.*.restartPolicy",
        L,
        keeps=("OnFailure",),
        why="JobSet runs the pods with restartPolicy OnFailure",
    ),
    Entry("spec.{replicas}.*.template.metadata.labels", M, f"{PATCH}.template.spec.template.metadata.labels"),
    Entry("spec.{replicas}.*.template.metadata.annotations", M, f"{PATCH}.template.spec.template.metadata.annotations"),
    Entry("spec.{replicas}.*.template.metadata.name", L, why="pods are named by their Job"),
    Entry("spec.{replicas}.*.template.metadata.namespace", L, why="pods run in the TrainJob's namespace"),
    Entry("spec.{replicas}.*.template.metadata.finalizers", L, why="not expressible through runtimePatches"),
    # --- pod spec ----------------------------------------------------------------------------------
    Entry(f"{POD}.affinity", M, f"{POD_PATCH}.affinity"),
    Entry(f"{POD}.nodeSelector", M, f"{POD_PATCH}.nodeSelector"),
    Entry(f"{POD}.tolerations", M, f"{POD_PATCH}.tolerations"),
    Entry(f"{POD}.schedulingGates", M, f"{POD_PATCH}.schedulingGates"),
    Entry(f"{POD}.securityContext", M, f"{POD_PATCH}.securityContext", "checked by the tenancy rules"),
    Entry(f"{POD}.serviceAccountName", M, f"{POD_PATCH}.serviceAccountName"),
    Entry(f"{POD}.imagePullSecrets", M, f"{POD_PATCH}.imagePullSecrets"),
    Entry(
        f"{POD}.volumes",
        M,
        f"{POD_PATCH}.volumes",
        "hostPath, inline network volumes and other namespaces' claims are refused by the tenancy rules",
    ),
    Entry(
        f"{POD}.terminationGracePeriodSeconds",
        M,
        f"{POD_PATCH}.terminationGracePeriodSeconds",
        since="2.3.0",
        why="runtimePatches has the field from Trainer 2.3",
    ),
    Entry(f"{POD}.hostNetwork", T, why="host namespaces are refused in team namespaces"),
    Entry(f"{POD}.hostPID", T, why="host namespaces are refused in team namespaces"),
    Entry(f"{POD}.hostIPC", T, why="host namespaces are refused in team namespaces"),
    Entry(f"{POD}.restartPolicy", L, keeps=("OnFailure",), why="JobSet runs the pods with restartPolicy OnFailure"),
    Entry(
        f"{POD}.priorityClassName",
        L,
        why="pod priority: use schedulingPolicy.priorityClass / a Kueue WorkloadPriorityClass instead",
    ),
    Entry(f"{POD}.priority", SERVER, why="resolved from priorityClassName by admission"),
    Entry(f"{POD}.overhead", SERVER, why="set from the RuntimeClass by admission"),
    Entry(f"{POD}.serviceAccount", L, why="deprecated alias of serviceAccountName; set serviceAccountName"),
    Entry(f"{POD}.activeDeadlineSeconds", L, why="use spec.runPolicy.activeDeadlineSeconds (the whole job)"),
    *_unpatchable(POD, "automountServiceAccountToken", "dnsConfig"),
    Entry(f"{POD}.dnsPolicy", L, keeps=("ClusterFirst",), why="not expressible through runtimePatches"),
    Entry(f"{POD}.enableServiceLinks", L, keeps=(True,), why="not expressible through runtimePatches"),
    Entry(f"{POD}.ephemeralContainers", L, why="not part of a pod template"),
    Entry(f"{POD}.hostAliases", L, why="not expressible through runtimePatches"),
    Entry(f"{POD}.hostUsers", L, keeps=(True,), why="not expressible through runtimePatches"),
    Entry(f"{POD}.hostname", L, why="JobSet names the pods' hosts"),
    Entry(f"{POD}.hostnameOverride", L, why="JobSet names the pods' hosts"),
    Entry(f"{POD}.subdomain", L, why="JobSet sets the subdomain for pod DNS"),
    Entry(f"{POD}.setHostnameAsFQDN", L, why="not expressible through runtimePatches"),
    Entry(f"{POD}.initContainers", L, why="runtimePatches can only change the runtime's own init containers"),
    Entry(f"{POD}.nodeName", L, why="bypasses the scheduler and Kueue's placement"),
    *_unpatchable(POD, "os", "preemptionPolicy", "readinessGates"),
    Entry(f"{POD}.resourceClaims", L, why="dynamic resource claims are not expressible through runtimePatches"),
    Entry(f"{POD}.resources", L, why="pod-level resources: use the container's resources (resourcesPerNode)"),
    Entry(f"{POD}.runtimeClassName", L, why="not expressible through runtimePatches"),
    Entry(
        f"{POD}.schedulerName",
        L,
        keeps=("default-scheduler",),
        why="Kueue and the default scheduler place the pods (TAS)",
    ),
    Entry(f"{POD}.schedulingGroup", L, why="not expressible through runtimePatches"),
    Entry(f"{POD}.workloadRef", L, why="Kueue admits the TrainJob's pods as one Workload"),
    Entry(f"{POD}.shareProcessNamespace", L, why="not expressible through runtimePatches"),
    Entry(f"{POD}.topologySpreadConstraints", L, why="placement comes from the stack's TAS policy"),
    # --- the training container (other containers are reported whole) -----------------------------
    Entry(f"{CONTAINER}.name", S, "the runtime's node container", "the v1 container becomes the runtime's `node`"),
    Entry(
        f"{CONTAINER}.image",
        M,
        "spec.trainer.image",
        "MPI: the launcher's; workers run the runtime's image (reported when it differs)",
    ),
    Entry(
        f"{CONTAINER}.command",
        M,
        "spec.trainer.command",
        "torch: v2 sets PET_* for torchrun, not MASTER_ADDR/RANK/WORLD_SIZE (a non-torchrun command is reported)",
    ),
    Entry(f"{CONTAINER}.args", M, "spec.trainer.args"),
    Entry(
        f"{CONTAINER}.env",
        M,
        "spec.trainer.env",
        "the runtime's reserved names (PET_*, OMPI_MCA_*, DMLC_*) are refused",
    ),
    Entry(f"{CONTAINER}.resources", M, "spec.trainer.resourcesPerNode", "MPI: the workers'"),
    Entry(f"{CONTAINER}.volumeMounts", M, f"{NODE_PATCH}.volumeMounts"),
    Entry(f"{CONTAINER}.securityContext", M, f"{NODE_PATCH}.securityContext", "checked by the tenancy rules"),
    Entry(
        f"{CONTAINER}.ports",
        S,
        "the runtime's ports",
        "only the framework's default port is superseded; other ports are reported",
    ),
    Entry(
        f"{CONTAINER}.envFrom",
        L,
        why="TrainJob has no envFrom: list the keys as env with valueFrom.configMapKeyRef/secretKeyRef",
    ),
    Entry(
        f"{CONTAINER}.imagePullPolicy",
        L,
        keeps=("IfNotPresent",),
        why="not expressible: Kubernetes' default for the image applies",
    ),
    Entry(f"{CONTAINER}.workingDir", L, why="not expressible: cd in the command"),
    *_unpatchable(CONTAINER, "lifecycle", "livenessProbe", "readinessProbe", "startupProbe", "resizePolicy"),
    Entry(f"{CONTAINER}.restartPolicy", L, why="sidecar restart policy: not expressible"),
    *_unpatchable(CONTAINER, "restartPolicyRules", "stdin", "stdinOnce", "tty"),
    Entry(
        f"{CONTAINER}.terminationMessagePath",
        L,
        keeps=("/dev/termination-log",),
        why="not expressible through runtimePatches",
    ),
    Entry(f"{CONTAINER}.terminationMessagePolicy", L, keeps=("File",), why="not expressible through runtimePatches"),
    Entry(f"{CONTAINER}.volumeDevices", L, why="raw block devices are not expressible through runtimePatches"),
)

BY_PATTERN: dict[str, Entry] = {e.pattern: e for e in ENTRIES}


def _prefixes(pattern: str) -> set[str]:
    out, current = set(), ""
    for piece in re.findall(r"\[\]|[^.\[\]]+", pattern):
        current += piece if piece == "[]" else ("." if current else "") + piece
        out.add(current)
    return out - {pattern}


# Every pattern above an entry (`spec`, `spec.runPolicy`, …): the walk descends through these.
PREFIXES: frozenset[str] = frozenset(p for e in ENTRIES for p in _prefixes(e.pattern))


def entry_at(pattern: str, kind: str) -> Entry | None:
    entry = BY_PATTERN.get(pattern)
    return entry if entry is not None and (not entry.kinds or kind in entry.kinds) else None


def is_empty(value: Any) -> bool:
    """Values that carry nothing (dropping them loses nothing)."""
    return value is None or value is False or value in ("", 0) or value == {} or value == []
