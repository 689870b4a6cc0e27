"""The runtime vocabulary: how to read and edit (Cluster)TrainingRuntime manifests as plain dicts.

Catalog, placement, storage, tenancy and the policy rules all walk runtimes; they do it through these
functions so that "a training job", "a pod spec" or "tolerates a taint" means the same thing everywhere.
Standard library only: the CrossGuard policy pack imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from trainer_infra.core.upstream import jobset, kubernetes, nvidia, trainer
from trainer_infra.manifests import meta
from trainer_infra.manifests.pod_walk import RUNTIME_POD_SPECS, containers, pod_specs_at

#: The Trainer API runtimes and TrainJobs are written in: the version every matrix release of Trainer serves
#: (`apiVersions`; a unit test holds them equal), written here because the CrossGuard pack,
#: which imports this module, cannot read the YAML matrix.
TRAINER_API_VERSION = f"{trainer.GROUP}/v1alpha1"
JOBSET_NAME_LABEL = jobset.JOBSET_NAME_LABEL
FRAMEWORK_LABEL = trainer.FRAMEWORK_LABEL
ANCESTOR = trainer.ANCESTOR_LABEL
ANCESTOR_LABEL = ANCESTOR
STEPS = ("dataset-initializer", "model-initializer", "trainer")
# Reserved replicatedJob names; an MPI runtime's `node` job carries no ancestor label.
STEP_JOBS = ("dataset-initializer", "model-initializer", "node", "launcher")
INITIALIZERS = ("dataset-initializer", "model-initializer")
JOBS_PATH = "spec.template.spec.replicatedJobs"


def get_in(value: Any, *keys: str) -> Any:
    """`value[k1][k2]…`, or None where a level is missing or not a mapping."""
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def replicated_jobs(runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JobSet replicatedJobs of a runtime (empty when absent)."""
    jobs = get_in(runtime, "spec", "template", "spec", "replicatedJobs")
    return jobs if isinstance(jobs, list) else []


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a replicatedJob, created empty if missing (for injections that add to it)."""
    spec: dict[str, Any] = job["template"]["spec"]["template"].setdefault("spec", {})
    return spec


def pod_template_metadata(job: dict[str, Any]) -> dict[str, Any]:
    md: dict[str, Any] = job["template"]["spec"]["template"].setdefault("metadata", {})
    return md


def pod_specs(runtime: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, pod spec) for every replicatedJob whose pod spec is a mapping."""
    yield from pod_specs_at(runtime, RUNTIME_POD_SPECS)


def _image_slots(container: Mapping[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(relative path, holder, key) of every image reference: the container image and env values that name
    images (`*_IMAGE`), such as the data cache's CACHE_IMAGE."""
    if isinstance(container.get("image"), str):
        yield "image", container, "image"
    for k, env in enumerate(container.get("env") or []):
        if str(env.get("name", "")).endswith("_IMAGE") and isinstance(env.get("value"), str):
            yield f"env[{k}].value", env, "value"


def image_refs(container: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(relative path, image) for every image reference of a container (`_image_slots`)."""
    for path, holder, key in _image_slots(container):
        yield path, holder[key]


def replace_images(container: dict[str, Any], new: Callable[[str], str]) -> None:
    """Every image reference of a container (the same ones `image_refs` lists) replaced by `new(image)`."""
    for _, holder, key in _image_slots(container):
        holder[key] = new(holder[key])


def images_of(runtime: Mapping[str, Any]) -> list[str]:
    found = {img for _, pod in pod_specs(runtime) for _, c in containers(pod) for _, img in image_refs(c)}
    return sorted(found)


def ancestor(job: Mapping[str, Any]) -> str | None:
    labels = get_in(job, "template", "metadata", "labels") or {}
    value = labels.get(ANCESTOR)
    return str(value) if value is not None else None


def is_step_job(job: Mapping[str, Any]) -> bool:
    """Initializer and trainer jobs: by the ancestor label, or by the reserved replicatedJob names."""
    return ancestor(job) in STEPS or job.get("name") in STEP_JOBS


def is_training(job: Mapping[str, Any]) -> bool:
    """The pod sets that train: ancestor step `trainer`, or the job named `node`."""
    return ancestor(job) == "trainer" or job.get("name") == "node"


def quoted_resources(resources: Any) -> Any:
    """A container's `resources` with every numeric quantity as a string (`nvidia.com/gpu: 8` → `"8"`): the
    kubeflow SDK reads an unquoted accelerator count as 8.0 and then does not multiply it by numNodes. Anything
    else is left as it is (for the API's validation to judge)."""
    if not isinstance(resources, dict):
        return resources
    return {
        section: (
            {k: str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in values.items()}
            if section in ("requests", "limits") and isinstance(values, dict)
            else values
        )
        for section, values in resources.items()
    }


def quote_quantities(pod: Mapping[str, Any]) -> None:
    """Every container's quantities as strings, in place (`quoted_resources`)."""
    for _, c in containers(pod):
        if "resources" in c:
            c["resources"] = quoted_resources(c["resources"])


#: What the catalog's runtime files write for "a GPU"; a stack whose pools offer one other accelerator
#: resource (e.g. `amd.com/gpu`) serves them with that resource instead.
GENERIC_GPU = nvidia.GPU


def is_accelerator(resource: str) -> bool:
    """An extended resource a device plugin advertises (`vendor.com/name`), not a Kubernetes-native one."""
    domain, sep, _ = resource.partition("/")
    return bool(sep) and not (domain == kubernetes.DOMAIN or domain.endswith(f".{kubernetes.DOMAIN}"))


def accelerators_of(pod: Mapping[str, Any]) -> set[str]:
    """The accelerator resources some container of the pod requests or limits."""
    found = set()
    for _, c in containers(pod):
        res = c.get("resources") or {}
        for section in ("limits", "requests"):
            found |= {str(k) for k in (res.get(section) or {}) if is_accelerator(str(k))}
    return found


def exists_toleration(key: str, effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": effect}


def tolerates(tolerations: Iterable[Mapping[str, Any]], key: str, effect: str = "NoSchedule") -> bool:
    """True if some toleration covers a taint with this key and effect, whatever its value."""
    for t in tolerations:
        tkey, op, teffect = t.get("key"), t.get("operator", "Equal"), t.get("effect")
        key_ok = tkey == key or (not tkey and op == "Exists")
        if key_ok and teffect in (None, "", effect):
            return True
    return False


def with_tolerations(pod: dict[str, Any], tolerations: Iterable[dict[str, str]]) -> None:
    """Append each toleration the pod does not list yet (order kept, no duplicates)."""
    existing = list(pod.get("tolerations", []))
    pod["tolerations"] = existing + [t for t in tolerations if t not in existing]


# --- image references -----------------------------------------------------------------------------

DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")


def image_problem(image: str) -> str | None:
    """The catalog's rule: an explicit tag other than `latest` (a digest may follow, but does not replace
    the tag: people read tags). None when pinned."""
    name, _, digest = image.partition("@")
    if digest and not DIGEST.match(digest):
        return "digest must be sha256:<64 hex digits>"
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag or not repo:
        return "image has no tag: pin an explicit tag (and optionally @sha256:<digest>)"
    if tag == "latest":
        return "image tag 'latest' is not a pin: use an explicit version tag"
    return None


def unpinned(ref: str) -> str | None:
    """The policy's rule, for images we did not write (chart values, other objects): a digest pins;
    otherwise a tag other than latest. None when pinned."""
    if "@" in ref:
        return None
    last = ref.rsplit("/", 1)[-1]
    _, sep, tag = last.partition(":")
    if not sep or not tag:
        return f"image {ref!r} has no tag (resolves to latest)"
    if tag == "latest":
        return f"image {ref!r} uses the moving tag latest"
    return None


def minimal_runtime(
    name: str, container: dict[str, Any], replicas: int = 1, pod: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The smallest valid ClusterTrainingRuntime: one torch `node` job. The readiness gate's webhook probe and
    the end-to-end tests build theirs from it, so all agree with the Trainer webhook's rules. `container` is
    the `node` container (its name is set here); `pod` adds pod-spec fields."""
    spec = {**(pod or {}), "containers": [{**container, "name": "node"}]}
    return {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "ClusterTrainingRuntime",
        "metadata": meta.metadata(name, labels={FRAMEWORK_LABEL: "torch"}),
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"labels": {ANCESTOR: "trainer"}},
                                "spec": {"template": {"spec": spec}},
                            },
                        }
                    ]
                }
            },
        },
    }
