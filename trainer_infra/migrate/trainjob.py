"""The TrainJob a v1 job becomes: the trainer (image, command, env, resources, node and process counts), the
scheduling labels checked against the stack, and runtimePatches for what only the pod template says."""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from trainer_infra.core.errors import did_you_mean
from trainer_infra.core.upstream import kubernetes, training_operator
from trainer_infra.core.upstream.kueue import MULTIKUEUE_CONTROLLER as MULTIKUEUE
from trainer_infra.core.upstream.kueue import PRIORITY_LABEL, QUEUE_LABEL
from trainer_infra.core.upstream.trainer import GROUP as TRAINER_GROUP
from trainer_infra.manifests.runtime import TRAINER_API_VERSION, ancestor, get_in, quoted_resources, replicated_jobs
from trainer_infra.migrate.kinds import Kind, Role
from trainer_infra.migrate.mapping import Disposition, is_empty
from trainer_infra.migrate.replicas import Replica
from trainer_infra.migrate.result import Conversion, Path
from trainer_infra.migrate.select import Choice
from trainer_infra.migrate.target import Team
from trainer_infra.storage.injection import VOLUME as CLAIM_VOLUME
from trainer_infra.tenancy.admission.write_back import prune

SOURCE_ANNOTATION = "trainer-platform.io/migrated-from"
LAST_APPLIED = kubernetes.LAST_APPLIED
PATCH_MANAGER = "trainer-platform.io/migrate"
V1_MANAGERS = training_operator.CONTROLLER_NAMES
# Pod-spec fields runtimePatches carries (Trainer 2.2 PodSpecPatch), with the first version that has them.
POD_PATCH_FIELDS = {
    "affinity": "2.2.0",
    "imagePullSecrets": "2.2.0",
    "nodeSelector": "2.2.0",
    "schedulingGates": "2.2.0",
    "securityContext": "2.2.0",
    "serviceAccountName": "2.2.0",
    "tolerations": "2.2.0",
    "volumes": "2.2.0",
    "terminationGracePeriodSeconds": "2.3.0",
}
CONTAINER_PATCH_FIELDS = ("volumeMounts", "securityContext")
TORCHRUN = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def build_trainjob(
    c: Conversion,
    kind: Kind,
    team: Team,
    choice: Choice,
    replicas: list[Replica],
    primary: Replica,
    nodes: Replica | None,
) -> dict[str, Any]:
    r, md = c.result, c.obj.get("metadata") or {}
    labels = {str(k): v for k, v in sorted((md.get("labels") or {}).items())}
    annotations = {str(k): v for k, v in sorted((md.get("annotations") or {}).items()) if k != LAST_APPLIED}
    if LAST_APPLIED in (md.get("annotations") or {}):
        c.note(("metadata", "annotations", LAST_APPLIED), Disposition.SUPERSEDED, "rewritten by kubectl")
    annotations[SOURCE_ANNOTATION] = f"{kind.api_version}/{kind.kind} {c.source_namespace}/{r.name}"
    labels.update(scheduling(c, team))
    trainer: dict[str, Any] = {}
    main, mpath = primary.main, primary.container_path
    for key in ("image", "command", "args", "env"):
        if key in main:
            trainer[key] = main[key]
    check_torchrun(c, choice, main, mpath)
    resources_from = nodes or primary
    if resources_from.main.get("resources"):
        trainer["resourcesPerNode"] = quoted_resources(resources_from.main["resources"])
    trainer["numNodes"] = num_nodes(c, replicas)
    procs = num_procs(c, kind)
    if procs is not None:
        trainer["numProcPerNode"] = procs
    spec: dict[str, Any] = {"runtimeRef": {"name": choice.name, "kind": choice.kind, "apiGroup": TRAINER_GROUP}}
    run = get_in(c.obj, "spec", "runPolicy") or {}
    if run.get("activeDeadlineSeconds") is not None:
        spec["activeDeadlineSeconds"] = run["activeDeadlineSeconds"]
    if run.get("suspend") is not None:
        spec["suspend"] = run["suspend"]
    managed_by(c, run, spec)
    spec["trainer"] = trainer
    if nodes is not None:
        compare_nodes(c, choice, primary, nodes)
    patches = runtime_patches(c, choice, primary, nodes, team.claims)
    if patches:
        spec["runtimePatches"] = [
            {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": patches}}}}
        ]
    prune(spec)  # what Kueue's write-back of the admitted job would drop (tenancy/admission/write_back.py)
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainJob",
        "metadata": {
            "name": r.name,
            "namespace": team.namespace,
            "labels": dict(sorted(labels.items())),
            "annotations": dict(sorted(annotations.items())),
        },
        "spec": spec,
    }


def scheduling(c: Conversion, team: Team) -> dict[str, str]:
    """The queue and priority labels: from the flag, schedulingPolicy or the label, checked against the stack."""
    policy = get_in(c.obj, "spec", "runPolicy", "schedulingPolicy") or {}
    labels = get_in(c.obj, "metadata", "labels") or {}
    out: dict[str, str] = {}
    for label, key, flag, known, what in (
        (QUEUE_LABEL, "queue", c.opts.queue, team.queues, f"LocalQueue in {team.namespace}"),
        (
            PRIORITY_LABEL,
            "priorityClass",
            c.opts.priority,
            c.target.priority_classes,
            "WorkloadPriorityClass",
        ),
    ):
        given = {v for v in (policy.get(key), labels.get(label)) if v}
        policy_path: Path = ("spec", "runPolicy", "schedulingPolicy", key)
        path: Path = policy_path if policy.get(key) else ("metadata", "labels", label)
        if flag:
            value, path = flag, ("--queue" if key == "queue" else "--priority",)
        elif len(given) > 1:
            c.result.error(policy_path, f"{policy.get(key)!r} disagrees with label {label}={labels.get(label)}")
            continue
        elif given:
            value = str(given.pop())
        elif key == "queue" and known:
            value = "default" if "default" in known else known[0]
            c.note(policy_path, Disposition.MAPPED, f"no queue named: the team's LocalQueue {value}")
        else:
            continue
        if value not in known:
            flag_name = "--queue" if key == "queue" else "--priority"
            have = ", ".join(known) or "none"
            hint = did_you_mean(value, known) or f"pick one with {flag_name} (the stack has: {have})"
            c.result.error(path, f"{value!r} is not a {what} of stack {c.target.stack}", hint)
            continue
        out[label] = value
    return out


def check_torchrun(c: Conversion, choice: Choice, main: dict[str, Any], path: Path) -> None:
    policy = (choice.runtime.get("spec") or {}).get("mlPolicy") or {}
    command = [str(part) for part in (main.get("command") or [])]
    if "torch" in policy and command and not any(t in " ".join(command[:3]) for t in TORCHRUN):
        c.lossy(
            (*path, "command"),
            "v2 starts torch jobs for torchrun (PET_* env); the v1 operator's "
            "MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE are not set: run the script under torchrun",
        )


def num_nodes(c: Conversion, replicas: list[Replica]) -> int:
    nodes = [x for x in replicas if x.role is Role.NODES]
    counted = nodes or [x for x in replicas if x.role in (Role.TRAINER, Role.SAME)]
    total = 0
    for x in counted:
        n = x.spec.get("replicas", 1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            c.result.error((*x.path, "replicas"), f"expected a non-negative integer, found {n!r}")
            continue
        total += n
    if nodes:
        if get_in(c.obj, "spec", "runLauncherAsWorker") is True:
            total += 1  # the v1 launcher already was a worker: it stays one of the training hosts
        c.note(
            (*nodes[0].path, "replicas"),
            Disposition.MAPPED,
            "numNodes = training hosts: the launcher runs as node 0 (runLauncherAsNode)",
        )
    return max(total, 1)


def num_procs(c: Conversion, kind: Kind) -> int | None:
    key = "nprocPerNode" if kind.kind == "PyTorchJob" else "slotsPerWorker" if kind.kind == "MPIJob" else None
    value = get_in(c.obj, "spec", key) if key else None
    if value is None:
        return None
    path: Path = ("spec", str(key))
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        return int(value)
    if value == "auto":
        c.note(path, Disposition.SUPERSEDED, "auto is the torch runtime's default")
        return None
    if value in ("gpu", "cpu"):
        c.lossy(path, f"{value!r}: numProcPerNode takes an integer (auto, the default, uses the GPUs)")
        return None
    c.result.error(path, f"expected a positive integer or auto, found {value!r}")
    return None


def managed_by(c: Conversion, run: dict[str, Any], spec: dict[str, Any]) -> None:
    value = run.get("managedBy")
    path: Path = ("spec", "runPolicy", "managedBy")
    if value == MULTIKUEUE:
        spec["managedBy"] = MULTIKUEUE
    elif value in V1_MANAGERS:
        c.note(path, Disposition.SUPERSEDED, "the Trainer controller manages TrainJobs")
    elif value:
        c.lossy(path, f"{value!r}: TrainJob accepts only the Trainer controller or {MULTIKUEUE}")


def compare_nodes(c: Conversion, choice: Choice, launcher: Replica, nodes: Replica) -> None:
    """MPI: the workers become the runtime's `node` job, which keeps the runtime's image and command
    (sshd) and shares the launcher's env and resources (runLauncherAsNode)."""
    job = next((j for j in replicated_jobs(choice.runtime) if j.get("name") == "node"), {})
    pod = get_in(job, "template", "spec", "template", "spec") or {}
    node_image = next((x.get("image") for x in pod.get("containers") or [] if x.get("name") == "node"), None)
    main, path = nodes.main, nodes.container_path
    if main.get("image") != node_image:
        c.lossy(
            (*path, "image"),
            f"the runtime's node pods run {node_image}; only the launcher takes spec.trainer.image",
        )
    for key in ("command", "args"):
        if key in main:
            c.note((*path, key), Disposition.SUPERSEDED, "the runtime's node job runs sshd")
    if (main.get("env") or []) != (launcher.main.get("env") or []):
        c.lossy((*path, "env"), "differs from the launcher's: spec.trainer.env goes to launcher and nodes")
    if launcher.main.get("resources") and launcher.main.get("resources") != main.get("resources"):
        c.lossy(
            (*launcher.container_path, "resources"),
            "the launcher runs as a node and gets the workers' resources (spec.trainer.resourcesPerNode)",
        )


def runtime_patches(
    c: Conversion, choice: Choice, primary: Replica, nodes: Replica | None, claims: tuple[str, ...]
) -> list[dict[str, Any]]:
    trainer_job = next((j.get("name") for j in replicated_jobs(choice.runtime) if ancestor(j) == "trainer"), "node")
    out = []
    for replica, job in ((primary, trainer_job), (nodes, "node")):
        if replica is None:
            continue
        patch = pod_patch(c, replica, claims)
        if patch:
            out.append({"name": job, "template": {"spec": {"template": patch}}})
    return out


def through_claim_volume(
    volumes: list[Any], container: dict[str, Any], claims: tuple[str, ...]
) -> tuple[list[Any], dict[str, Any]]:
    """The team claim's volume renamed to the runtime's own (`initializer`), with the container's mounts of it: the
    patch then merges into that volume (by name) instead of adding a second volume of the claim, which the kubelet
    never mounts (kubernetes#132921). A mount at the runtime's path merges into its mount (by mountPath) and keeps
    its sub-path: the job's own directory, as for every job of the platform."""

    def name(x: Any) -> str | None:  # hostile input: anything but a named dict is left as it is
        return x["name"] if isinstance(x, dict) and isinstance(x.get("name"), str) else None

    def claim(v: Any) -> Any:
        source = v.get("persistentVolumeClaim") if isinstance(v, dict) else None
        return source.get("claimName") if isinstance(source, dict) else None

    renamed = {n: CLAIM_VOLUME for v in volumes if (n := name(v)) and claim(v) in claims}
    if not renamed:
        return volumes, container

    def rename(items: list[Any]) -> list[Any]:
        named = [name(x) in renamed for x in items]
        return [{**x, "name": renamed[x["name"]]} if hit else x for x, hit in zip(items, named, strict=True)]

    mounts = container.get("volumeMounts")
    if isinstance(mounts, list):
        container = {**container, "volumeMounts": rename(mounts)}
    return rename(volumes), container


def pod_patch(c: Conversion, replica: Replica, claims: tuple[str, ...]) -> dict[str, Any]:
    pod, meta = replica.pod, get_in(replica.spec, "template", "metadata") or {}
    patch: dict[str, Any] = {}
    metadata = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    if metadata:
        patch["metadata"] = metadata
    spec = {}
    for key, since in POD_PATCH_FIELDS.items():
        if key in pod and not is_empty(pod[key]) and Version(c.target.trainer_version) >= Version(since):
            spec[key] = pod[key]
    container = {k: replica.main[k] for k in CONTAINER_PATCH_FIELDS if not is_empty(replica.main.get(k))}
    if "volumes" in spec:
        spec["volumes"], container = through_claim_volume(spec["volumes"], container, claims)
    if container:
        spec["containers"] = [{"name": "node", **container}]
    if spec:
        patch["spec"] = spec
    return patch
