"""kwok Stages: upstream's fast node and pod stages, plus ours that end a Running pod on request (a label,
an annotated duration), so pods hold their quota until a scenario or a trace says they end."""

from __future__ import annotations

from typing import Any

import yaml

from trainer_infra.core.upstream import jobset, kubernetes, kwok
from trainer_infra.nodepools.kwok import FAKE_DISK, KWOK_ANNOTATION
from trainer_infra.sandbox.versions import module_dir

Obj = dict[str, Any]

#: kwok's own stages (read from the kwok module of the pinned version at run time), minus pod-complete.
KWOK_UPSTREAM_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
COMPLETE_LABEL = "e2e.trainer-platform/complete"
#: A Running pod with this annotation (a Go duration, e.g. ``"12.5s"``) succeeds that long after kwok saw it
#: Running: how `simulate` makes a trace job's pods run for the row's (compressed) duration.
DURATION_ANNOTATION = "simulate.trainer-platform.io/duration"
#: Label a running pod with an exit code (``"1"``, ``"42"``) and kwok makes it fail with that code.
FAIL_LABEL = "e2e.trainer-platform/fail"


def kwok_stages(kwok_version: str) -> list[Obj]:
    """kwok stages: upstream's fast node and pod stages, except that pods stay Running.

    kwok's default ``pod-complete`` finishes every Job-owned pod at once, which would free
    Kueue quota immediately; the scenarios need pods that hold their quota. Pods labelled
    ``e2e.trainer-platform/complete=true`` still complete (initializers, for instance).
    Since kwok 0.8 a config with any Stage replaces all defaults, so node stages are listed too.
    """
    root = module_dir(kwok.GO_MODULE, kwok_version)
    stages = [yaml.safe_load((root / rel).read_text()) for rel in KWOK_UPSTREAM_STAGES]
    return [
        *stages,
        kwok_complete_stage(),
        kwok_complete_stage(initializers=True),
        kwok_fail_stage(),
        kwok_duration_stage(),
    ]


def kwok_duration_stage() -> Obj:
    """Our stage: a Running pod annotated with a duration succeeds after it (kwok's stage delay, read from the
    annotation and measured from when kwok saw the pod Running)."""
    stage = _terminate_stage(
        "pod-complete-after-duration",
        {"key": f'.metadata.annotations["{DURATION_ANNOTATION}"]', "operator": "Exists"},
        exit_code="0",
        reason="Completed",
        phase="Succeeded",
    )
    stage["spec"]["delay"] = {
        "durationMilliseconds": 0,
        "durationFrom": {"expressionFrom": f'.metadata.annotations["{DURATION_ANNOTATION}"]'},
    }
    return stage


def kwok_fail_stage() -> Obj:
    """Our stage: a Running pod labelled ``e2e.trainer-platform/fail=<exit code>`` fails, every container
    terminated with that code (what the Job controller's podFailurePolicy reads)."""
    return _terminate_stage(
        "pod-fail-on-request",
        {"key": f'.metadata.labels["{FAIL_LABEL}"]', "operator": "Exists"},
        exit_code=f'{{{{ index $.metadata.labels "{FAIL_LABEL}" }}}}',  # `$`: the pod (`.` is the container here)
        reason="Error",
        phase="Failed",
    )


def kwok_complete_stage(*, initializers: bool = False) -> Obj:
    """Our stage: a Running pod carrying the complete label succeeds.

    With ``initializers``: pods of a JobSet's ``dataset-initializer``/``model-initializer`` jobs
    succeed too (they download and exit in real life; trainers run until stopped).
    """
    if initializers:
        name, selector = (
            "pod-complete-initializers",
            {
                "key": f'.metadata.labels["{jobset.REPLICATED_JOB_NAME_LABEL}"]',
                "operator": "In",
                "values": ["dataset-initializer", "model-initializer"],
            },
        )
    else:
        name, selector = (
            "pod-complete-on-request",
            {"key": f'.metadata.labels["{COMPLETE_LABEL}"]', "operator": "In", "values": ["true"]},
        )
    return _terminate_stage(name, selector, exit_code="0", reason="Completed", phase="Succeeded")


def _terminate_stage(name: str, selector: Obj, *, exit_code: str, reason: str, phase: str) -> Obj:
    """A kwok Stage that ends a selected Running pod: every container terminated, the pod in ``phase``."""
    return {
        "apiVersion": kwok.STAGE_API,
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Running"]},
                    selector,
                ]
            },
            "next": {
                "statusTemplate": "\n".join(
                    [
                        "{{ $now := Now }}",
                        "containerStatuses:",
                        "{{ range .spec.containers }}",
                        "- name: {{ .name | Quote }}",
                        "  image: {{ .image | Quote }}",
                        "  ready: false",
                        "  restartCount: 0",
                        "  started: false",
                        "  state:",
                        "    terminated:",
                        f"      exitCode: {exit_code}",
                        f"      reason: {reason}",
                        "      startedAt: {{ $now | Quote }}",
                        "      finishedAt: {{ $now | Quote }}",
                        "{{ end }}",
                        f"phase: {phase}",
                    ]
                )
            },
        },
    }


def kwok_node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    pod_cidr: str | None = None,
) -> dict[str, Any]:
    """A fake Node kwok manages (the shape of kwok's docs), with room for a disk-bounded team pod."""
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110", kubernetes.EPHEMERAL_STORAGE: FAKE_DISK, **(capacity or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {**KWOK_ANNOTATION, kubernetes.NODE_TTL_ANNOTATION: "0"},
            "labels": {
                kubernetes.HOSTNAME_LABEL: name,
                kubernetes.OS_LABEL: "linux",
                kubernetes.ARCH_LABEL: "amd64",
                "type": "kwok",
                **(labels or {}),
            },
        },
        "spec": {"taints": taints or [], **({"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]} if pod_cidr else {})},
        "status": {"capacity": cap, "allocatable": cap},
    }
