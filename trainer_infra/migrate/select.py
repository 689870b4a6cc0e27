"""Which of the stack's runtimes replaces a v1 job, and why.

The framework follows from the kind; an MPIJob that runs DeepSpeed (its launcher's command, arguments or
image say `deepspeed`) gets the DeepSpeed runtime, any other MPIJob an `mpi` one. Among the runtimes
carrying that `trainer.kubeflow.org/framework` label, the team's own TrainingRuntime comes first, then
`<framework>-distributed`, then runtimes that need no optional platform feature, by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer_infra.catalog.model import DEPRECATED, REQUIRES, SUPPORT_LABEL
from trainer_infra.manifests.runtime import FRAMEWORK_LABEL
from trainer_infra.migrate.kinds import Kind
from trainer_infra.migrate.target import Target

# The ML policy a framework's runtime must carry: v1 semantics (torchrun env, MPI hostfile) depend on it.
POLICY = {"torch": "torch", "deepspeed": "mpi", "mpi": "mpi", "jax": "jax", "xgboost": "xgboost"}


@dataclass(frozen=True)
class Choice:
    name: str
    kind: str  # ClusterTrainingRuntime or TrainingRuntime
    runtime: dict[str, Any]
    reason: str


class NoRuntimeError(Exception):
    def __init__(self, message: str, hint: str) -> None:
        self.message, self.hint = message, hint
        super().__init__(message)


def framework(kind: Kind, launcher: dict[str, Any] | None) -> tuple[str, str]:
    """(framework, why) for a v1 job; `launcher` is the MPI launcher's training container."""
    if kind.framework != "mpi":
        return kind.framework, f"{kind.kind} is a {kind.framework} job"
    c = launcher or {}
    words = [str(w) for w in [*(c.get("command") or []), *(c.get("args") or [])]]
    if any("deepspeed" in w.lower() for w in words):
        return "deepspeed", "the MPI launcher runs deepspeed"
    if "deepspeed" in str(c.get("image", "")).lower():
        return "deepspeed", f"the MPI launcher image {c.get('image')} is a DeepSpeed image"
    return "mpi", "an MPIJob that does not run DeepSpeed"


def _rank(name: str, runtime: dict[str, Any], fw: str) -> tuple[int, int, str]:
    annotations = (runtime.get("metadata") or {}).get("annotations") or {}
    return (0 if name == f"{fw}-distributed" else 1, 1 if REQUIRES in annotations else 0, name)


def _framework_of(runtime: dict[str, Any]) -> str:
    return str(((runtime.get("metadata") or {}).get("labels") or {}).get(FRAMEWORK_LABEL, ""))


def _deprecated(runtime: dict[str, Any]) -> bool:
    return ((runtime.get("metadata") or {}).get("labels") or {}).get(SUPPORT_LABEL) == DEPRECATED


def choose(target: Target, namespace: str, kind: Kind, launcher: dict[str, Any] | None, override: str | None) -> Choice:
    fw, why = framework(kind, launcher)
    if override:
        found = target.runtime(namespace, override)
        if found is None:
            raise NoRuntimeError(
                f"--runtime {override}: the stack {target.stack} serves no runtime of that name to {namespace}",
                f"served: {', '.join(target.runtime_names(namespace)) or 'none'}",
            )
        return Choice(override, found[0], found[1], f"--runtime {override} (the job's framework would be {fw})")
    team = sorted(
        (_rank(n, r, fw), n, r)
        for (ns, n), r in target.team_runtimes.items()
        if ns == namespace and _framework_of(r) == fw
    )
    cluster = sorted(
        (_rank(n, r, fw), n, r) for n, r in target.runtimes.items() if _framework_of(r) == fw and not _deprecated(r)
    )
    policy = POLICY.get(fw)
    candidates = [
        (n, "TrainingRuntime" if i < len(team) else "ClusterTrainingRuntime", r)
        for i, (_, n, r) in enumerate([*team, *cluster])
        if policy is None or policy in ((r.get("spec") or {}).get("mlPolicy") or {})
    ]
    if not candidates:
        served = ", ".join(f"{n} ({_framework_of(r) or '?'})" for n, r in sorted(target.runtimes.items()))
        raise NoRuntimeError(
            f"{kind.kind}: {why}, and the stack {target.stack} serves no runtime for framework {fw}",
            f"pick one with --runtime (served: {served or 'none'})",
        )
    name, rkind, runtime = candidates[0]
    others = [n for n, _, _ in candidates[1:]]
    also = f"; also {', '.join(others)}" if others else ""
    where = f"the team's {rkind}" if rkind == "TrainingRuntime" else "the catalog's"
    return Choice(name, rkind, runtime, f"{why} → {where} {fw} runtime {name}{also}")
