"""Checks on a TrainJob before it is written, at run time (no cluster, no CRD files needed).

1. The official Trainer API models (`kubeflow-trainer-api`, generated from the Trainer CRDs): types and
   unknown fields at every level, including the core types inside env, volumes, affinity, resources. The
   models drop unknown fields silently, so the object is compared with its round trip.
2. The Trainer webhook's TrainJob rules against the runtime it references (`catalog.webhook`), and its
   runtimePatches rules (Trainer 2.2.1 `pkg/runtime/framework/plugins/jobset/jobset.go` Validate).
The tests add the full CRD schema and CEL check (the conformance harness, against the pinned CRDs).
"""

from __future__ import annotations

import re
from typing import Any

from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob
from pydantic import ValidationError

from trainer_infra.catalog.webhook import trainjob_findings
from trainer_infra.errors import format_path

Finding = tuple[str, str]
NO_ENV_CONTAINERS = ("node", "dataset-initializer", "model-initializer")
# validation.IsDomainPrefixedPath: a DNS subdomain, a slash, a non-empty path.
DOMAIN_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/\S+$")


def _roundtrip(original: Any, back: Any, path: tuple[str | int, ...]) -> list[Finding]:
    if isinstance(original, dict):
        back = back if isinstance(back, dict) else {}
        out: list[Finding] = []
        for key in original:
            if key not in back and original[key] is not None:
                out.append((format_path((*path, key)), "unknown field (the Trainer API has no such field)"))
            else:
                out.extend(_roundtrip(original[key], back.get(key), (*path, key)))
        return out
    if isinstance(original, list) and isinstance(back, list):
        return [f for i, (a, b) in enumerate(zip(original, back, strict=False)) for f in _roundtrip(a, b, (*path, i))]
    return []


def api_findings(trainjob: dict[str, Any]) -> list[Finding]:
    try:
        model = TrainerV1alpha1TrainJob.from_dict(trainjob)
    except ValidationError as exc:
        # The generated models validate nested objects separately, so `loc` is relative to `exc.title`.
        model = str(exc.title).removeprefix("IoK8sApiCoreV1").removeprefix("TrainerV1alpha1")
        return [("spec", f"{model}.{format_path(e['loc'])}: {e['msg']}") for e in exc.errors()]
    except (TypeError, AttributeError, ValueError) as exc:  # the generated from_dict assumes its nested types
        return [("spec", f"a value has the wrong type ({exc})")]
    return _roundtrip(trainjob, model.to_dict(), ())


def _jobs(runtime: dict[str, Any]) -> dict[str, dict[str, Any]]:
    jobs = ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs") or []
    return {str(j.get("name")): j for j in jobs}


def patch_findings(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[Finding]:
    """What the Trainer 2.2 webhook refuses in runtimePatches."""
    out: list[Finding] = []
    jobs = _jobs(runtime)
    for p, patch in enumerate((trainjob.get("spec") or {}).get("runtimePatches") or []):
        base = f"spec.runtimePatches[{p}]"
        if not DOMAIN_PATH.match(str(patch.get("manager", ""))):
            out.append((f"{base}.manager", "must be a domain-prefixed path (example.com/name)"))
        spec = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
        for j, job in enumerate(spec.get("replicatedJobs") or []):
            path = f"{base}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
            runtime_job = jobs.get(str(job.get("name")))
            if runtime_job is None:
                out.append((f"{path}.name", f"the runtime has no replicated job {job.get('name')!r}"))
                continue
            pod = ((runtime_job.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            names = {c.get("name") for key in ("containers", "initContainers") for c in pod.get(key) or []}
            patched = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for key in ("initContainers", "containers"):
                for c, container in enumerate(patched.get(key) or []):
                    where = f"{path}.template.spec.template.spec.{key}[{c}]"
                    if container.get("name") not in names:
                        out.append((where, f"the runtime's {job.get('name')} job has no container "
                                           f"{container.get('name')!r}"))
                    elif key == "containers" and container.get("env") and container.get("name") in NO_ENV_CONTAINERS:
                        out.append((f"{where}.env", "env of the node/initializer containers goes in spec.trainer.env"))
    return out


def findings(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[Finding]:
    """The API's findings first; the webhook's rules read a well-typed object only."""
    return api_findings(trainjob) or [*trainjob_findings(trainjob, runtime), *patch_findings(trainjob, runtime)]
