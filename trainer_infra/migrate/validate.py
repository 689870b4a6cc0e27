"""Checks on a TrainJob before it is written, at run time (no cluster, no CRD files needed).

1. The official Trainer API models (`kubeflow-trainer-api`, generated from the Trainer CRDs): types and
   unknown fields at every level, including the core types inside env, volumes, affinity, resources. The
   models drop unknown fields silently, so the object is compared with its round trip.
2. The Trainer webhook's TrainJob rules against the runtime it references, runtimePatches included
   (`catalog.webhook`).
The tests add the full CRD schema and CEL check (the conformance harness, against the pinned CRDs).
"""

from __future__ import annotations

from typing import Any

from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob
from pydantic import ValidationError

from trainer_infra.catalog.webhook import runtime_patch_findings, trainjob_findings
from trainer_infra.core.errors import format_path

Finding = tuple[str, str]


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


def findings(trainjob: dict[str, Any], runtime: dict[str, Any]) -> list[Finding]:
    """The API's findings first; the webhook's rules read a well-typed object only."""
    return api_findings(trainjob) or [*trainjob_findings(trainjob, runtime), *runtime_patch_findings(trainjob, runtime)]
