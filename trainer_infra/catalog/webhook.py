"""The Trainer admission rules for runtimes and TrainJobs (v2.2/v2.3), checked offline on plain dicts.

The real webhook runs in the cluster; these checks run on every runtime file, every rendered runtime and
every TrainJob the SDK builds in tests, so a runtime that the webhook would refuse never reaches `pulumi up`.
Sources: kubeflow/trainer `pkg/webhooks/trainingruntime_webhook.go` (ancestor jobs: replicas 1 and the
required container) and `pkg/runtime/framework/plugins/*` Validate (initializers, reserved env names,
runtimePatches in `plugins/jobset/jobset.go`).
Each finding is `(path, message)` with a path inside the object, e.g. `spec.template.spec.replicatedJobs[0].replicas`.
"""

from __future__ import annotations

import re
from typing import Any

from trainer_infra.manifests.pod_walk import TEMPLATE_LISTS, containers
from trainer_infra.manifests.runtime import (
    ANCESTOR_LABEL,
    JOBS_PATH,
    ancestor,
    get_in,
    pod_specs,
    replicated_jobs,
)

Finding = tuple[str, str]
JOBS = JOBS_PATH
# Ancestor label value → the container its job must have.
REQUIRED_CONTAINER = {
    "trainer": "node",
    "dataset-initializer": "dataset-initializer",
    "model-initializer": "model-initializer",
}
INITIALIZER_VOLUME = "initializer"
# Env names the ML policy plugins own on the trainer: a TrainJob may not set them.
RESERVED_ENV_PREFIXES = {"torch": ("PET_",), "mpi": ("OMPI_MCA_",), "xgboost": ("DMLC_",)}
# Containers whose env a runtimePatch may not set (spec.trainer.env / the initializers' env instead).
NO_PATCHED_ENV = ("node", "dataset-initializer", "model-initializer")
# validation.IsDomainPrefixedPath: a DNS subdomain, a slash, a non-empty path.
DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/\S+$")


def _containers(job: dict[str, Any], lists: tuple[str, ...] = ("containers",)) -> list[dict[str, Any]]:
    """A replicatedJob's containers of `lists`; the webhook reads init and main containers, and a pod is
    created without ephemeral ones (`TEMPLATE_LISTS`)."""
    return [c for _, c in containers(get_in(job, "template", "spec", "template", "spec") or {}, lists)]


def claim_template_findings(runtime: dict[str, Any]) -> list[Finding]:
    """JobSet (volumeClaimPolicies): a claim template must not share its name with a pod volume of any
    replicatedJob; the JobSet webhook refuses the JobSet that Trainer builds from such a runtime."""
    spec = runtime.get("spec", {}).get("template", {}).get("spec", {})
    findings: list[Finding] = []
    for p, policy in enumerate(spec.get("volumeClaimPolicies") or []):
        for t, template in enumerate(policy.get("templates") or []):
            name = (template.get("metadata") or {}).get("name")
            for i, (_, pod) in enumerate(pod_specs(runtime)):
                if name in [v.get("name") for v in pod.get("volumes") or []]:
                    findings.append(
                        (
                            f"spec.template.spec.volumeClaimPolicies[{p}].templates[{t}]",
                            f"claim template {name!r} clashes with a volume of {JOBS}[{i}]",
                        )
                    )
    return findings


def runtime_findings(runtime: dict[str, Any], initializer_volume: bool = True) -> list[Finding]:
    """What the runtime webhook refuses, plus the catalog rule that initializers hand data over through
    the `initializer` volume (`initializer_volume=False` for runtimes whose initializer does not, e.g. the
    data cache one)."""
    findings: list[Finding] = claim_template_findings(runtime)
    for i, job in enumerate(replicated_jobs(runtime)):
        step = ancestor(job)
        if step not in REQUIRED_CONTAINER:
            continue
        path = f"{JOBS}[{i}]"
        replicas = job.get("replicas", 1)  # JobSet's default
        if replicas != 1:
            findings.append((f"{path}.replicas", f"a job labelled {ANCESTOR_LABEL}={step} must have replicas 1"))
        names = [c.get("name") for c in _containers(job)]
        want = REQUIRED_CONTAINER[step]
        if want not in names:
            findings.append(
                (f"{path}.template.spec.template.spec.containers", f"the {step} job needs a container named {want!r}")
            )
        elif step != "trainer" and initializer_volume:
            container = _containers(job)[names.index(want)]
            mounts = [m.get("name") for m in container.get("volumeMounts") or []]
            if INITIALIZER_VOLUME not in mounts:
                c = names.index(want)
                findings.append(
                    (
                        f"{path}.template.spec.template.spec.containers[{c}].volumeMounts",
                        f"the {want} container must mount the {INITIALIZER_VOLUME!r} volume (the trainer reads it)",
                    )
                )
    return findings


def trainjob_findings(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[Finding]:
    """What the TrainJob webhook refuses for this TrainJob against the runtime it references."""
    findings: list[Finding] = []
    spec = trainjob.get("spec", {})
    jobs = {j.get("name"): j for j in replicated_jobs(runtime)}
    for kind, name in (("dataset", "dataset-initializer"), ("model", "model-initializer")):
        if not (spec.get("initializer") or {}).get(kind):
            continue
        job = jobs.get(name)
        if job is None:
            findings.append(("spec.runtimeRef", f"runtime has no {name} job but spec.initializer.{kind} is set"))
            continue
        containers = {c.get("name"): c for c in _containers(job, TEMPLATE_LISTS)}
        if name not in containers:
            findings.append(("spec.runtimeRef", f"runtime's {name} job has no {name} container"))
        elif INITIALIZER_VOLUME not in [m.get("name") for m in containers[name].get("volumeMounts") or []]:
            findings.append(("spec.runtimeRef", f"runtime's {name} container does not mount {INITIALIZER_VOLUME!r}"))
    policy = runtime.get("spec", {}).get("mlPolicy", {})
    prefixes = tuple(p for source, ps in RESERVED_ENV_PREFIXES.items() if source in policy for p in ps)
    for i, env in enumerate((spec.get("trainer") or {}).get("env") or []):
        if prefixes and str(env.get("name", "")).startswith(prefixes):
            findings.append((f"spec.trainer.env[{i}].name", f"{env.get('name')} is reserved by the ML policy"))
    return findings


def runtime_patch_findings(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[Finding]:
    """What the TrainJob webhook refuses in runtimePatches (Trainer 2.2): a domain-prefixed manager, only jobs
    and containers the runtime has, no env on the node and initializer containers."""
    findings: list[Finding] = []
    jobs = {str(j.get("name")): j for j in replicated_jobs(runtime)}
    for p, patch in enumerate(get_in(trainjob, "spec", "runtimePatches") or []):
        base = f"spec.runtimePatches[{p}]"
        if not DOMAIN_PATH.match(str(patch.get("manager", ""))):
            findings.append((f"{base}.manager", "must be a domain-prefixed path (example.com/name)"))
        for j, job in enumerate(get_in(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []):
            path = f"{base}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            runtime_job = jobs.get(str(job.get("name")))
            if runtime_job is None:
                findings.append((f"{path}.name", f"the runtime has no replicated job {job.get('name')!r}"))
                continue
            names = {c.get("name") for c in _containers(runtime_job, TEMPLATE_LISTS)}
            pod = get_in(job, "template", "spec", "template", "spec") or {}
            for where, container in containers(pod, TEMPLATE_LISTS):
                at, name = f"{path}.template.spec.template.spec.{where}", container.get("name")
                if name not in names:
                    findings.append((at, f"the runtime's {job.get('name')} job has no container {name!r}"))
                elif where.startswith("containers") and container.get("env") and name in NO_PATCHED_ENV:
                    findings.append((f"{at}.env", "the node and initializer containers take env from spec.trainer"))
    return findings
