"""Every pod spec and every container of a manifest, whatever its kind, each with its path inside the object.

One walker for the whole product: a rule that walks containers its own way misses a list or a shape, and a
hostile member hides a privileged container exactly there (an ephemeral container, a LeaderWorkerSet's leader
template, a TrainJob's runtimePatches). Every reader and writer of containers goes through here; one that
walks fewer lists names them (`TEMPLATE_LISTS`) and says why. Input is hostile: a list or an item of another
type is skipped (the API server's validation reports it). Standard library only: the CrossGuard pack imports it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: Every container list of a core PodSpec.
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
#: The lists a pod can be created with: the API server adds ephemeral containers to a running pod only (its
#: `ephemeralcontainers` subresource), and a TrainJob's runtimePatches have no such field.
TEMPLATE_LISTS = ("initContainers", "containers")
#: The containers that do a pod's work, where the platform adds what the work needs (mounts, env, resources).
MAIN_LISTS = ("containers",)

#: "each item of the list here"
EACH = "[]"
_JOB_POD = ("template", "spec", "template", "spec")
_RUNTIME_JOBS = ("spec", "template", "spec", "replicatedJobs", EACH)
_WORKLOAD = ("spec", "template", "spec")
_LWS = ("spec", "leaderWorkerTemplate")
#: Where each kind the product reads or writes keeps its pod specs (keys, `EACH` for every item of a list).
POD_SPEC_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Pod": (("spec",),),
    "Job": (_WORKLOAD,),
    "Deployment": (_WORKLOAD,),
    "StatefulSet": (_WORKLOAD,),
    "DaemonSet": (_WORKLOAD,),
    "JobSet": (("spec", "replicatedJobs", EACH, *_JOB_POD),),
    "TrainingRuntime": ((*_RUNTIME_JOBS, *_JOB_POD),),
    "ClusterTrainingRuntime": ((*_RUNTIME_JOBS, *_JOB_POD),),
    "TrainJob": (("spec", "runtimePatches", EACH, "trainingRuntimeSpec", *_RUNTIME_JOBS[1:], *_JOB_POD),),
    "LeaderWorkerSet": ((*_LWS, "leaderTemplate", "spec"), (*_LWS, "workerTemplate", "spec")),
}
#: A (Cluster)TrainingRuntime's pod specs: the runtime vocabulary walks runtimes whatever their kind field says.
RUNTIME_POD_SPECS = POD_SPEC_PATHS["TrainingRuntime"]


def containers(
    pod: Mapping[str, Any], lists: tuple[str, ...] = CONTAINER_LISTS
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(`initContainers[0]`, container), … for every container of a pod spec, in `lists` order."""
    for field in lists:
        items = pod.get(field)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if isinstance(c, dict):
                yield f"{field}[{i}]", c


def not_containers(pod: Mapping[str, Any], lists: tuple[str, ...] = CONTAINER_LISTS) -> Iterator[str]:
    """`containers[1]`, … for every item of a container list that is not a mapping: what `containers` skips,
    for a reader that reports a file's mistakes."""
    for field in lists:
        items = pod.get(field)
        for i, c in enumerate(items if isinstance(items, list) else []):
            if not isinstance(c, dict):
                yield f"{field}[{i}]"


def by_name(where: str, container: Mapping[str, Any]) -> str:
    """`containers[node]` for (`containers[0]`, a container named node): what a message names a container by."""
    return f"{where.partition('[')[0]}[{container.get('name', '?')}]"


def _follow(value: Any, path: tuple[str, ...], at: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if not path:
        if isinstance(value, dict):
            yield at, value
        return
    key, rest = path[0], path[1:]
    if key == EACH:
        for i, item in enumerate(value if isinstance(value, list) else []):
            yield from _follow(item, rest, f"{at}[{i}]")
    elif isinstance(value, Mapping):
        yield from _follow(value.get(key), rest, f"{at}.{key}" if at else key)


def pod_specs_at(obj: Mapping[str, Any], paths: tuple[tuple[str, ...], ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, pod spec) for every pod spec that is a mapping at one of `paths` (`POD_SPEC_PATHS` entries)."""
    for path in paths:
        yield from _follow(obj, path, "")


def pod_specs(obj: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, pod spec) for every pod spec of an object of a kind in `POD_SPEC_PATHS` (none for other kinds)."""
    yield from pod_specs_at(obj, POD_SPEC_PATHS.get(str(obj.get("kind")), ()))


def all_containers(
    obj: Mapping[str, Any], lists: tuple[str, ...] = CONTAINER_LISTS
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path inside the object, container) for every container of every pod spec of the object."""
    for at, pod in pod_specs(obj):
        for where, c in containers(pod, lists):
            yield f"{at}.{where}", c
