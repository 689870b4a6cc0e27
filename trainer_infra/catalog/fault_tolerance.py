"""Fault tolerance and lifecycle defaults for every served runtime (`runtimes.faultTolerance`, per runtime
`runtimes.overrides.<name>.faultTolerance`).

What the real controllers do with them (JobSet 0.12.0, Trainer 2.2.1/2.3.0 pass the runtime's JobSet spec
through unchanged):
- a training pod fails → its Job fails (`backoffLimit: 0`: one lost rank breaks the gang) → the JobSet
  restarts every Job (`failurePolicy.maxRestarts` times; no rule matched means RestartJobSet) → then the
  JobSet, the TrainJob and Kueue's Workload are Failed and the quota is released;
- an exit code a restart cannot fix (`nonRetriableExitCodes`, default 2/126/127: usage error, command not
  executable, command not found) fails the Job through its `podFailurePolicy`, and the JobSet rule on reason
  `PodFailurePolicy` fails the JobSet at once;
- a pod evicted by a node drain, preemption or a failing node (condition `DisruptionTarget`) is replaced
  without counting as a failure;
- `activeDeadlineSeconds` bounds each Job (per attempt); reason `DeadlineExceeded` fails the JobSet, no restart;
- a job Kueue evicts (preempted by a higher priority, reclaimed by its lender, `waitForPodsReady`) is suspended:
  Kueue 0.19.2 sets the TrainJob's `spec.suspend` (pkg/controller/jobs/trainjob/trainjob_controller.go `Stop`) and
  keeps its quota until no pod of it is active (pkg/controller/jobframework/reconciler.go, "handle eviction");
  Trainer suspends the JobSet, JobSet its Jobs, and the Job controller deletes their pods, so every process gets
  SIGTERM and `terminationGracePeriodSeconds` (every step Job's pods) to write its checkpoint before SIGKILL.
  Re-admitted, the TrainJob runs again in the same job directory, where the checkpoint is.

Not offered: `ttlSecondsAfterFinished`. At Trainer 2.2.1 and 2.3.0 a TrainJob whose *failed* JobSet is
deleted gets a new JobSet with its restart budget reset, forever (trainer#3779, fixed after 2.3.0 by
trainer#3891; trainer#3737); a Job-level TTL makes a running JobSet recreate a finished initializer.
Runtime files that set one are refused (`ttl_problems`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from trainer_infra.core.model import StrictModel
from trainer_infra.manifests.runtime import is_step_job, is_training, replicated_jobs

RULE_NON_RETRIABLE = "nonRetriableExitCode"
RULE_DEADLINE = "deadlineExceeded"
TTL_ISSUES = ("trainer#3779", "trainer#3737")
#: the default grace period: Kubernetes' 30 s is short for writing a large model's checkpoint to shared storage
GRACE_SECONDS = 120


class FaultTolerance(StrictModel):
    """Restart limit and failure rules of the JobSet behind every TrainJob of a runtime."""

    max_restarts: int = Field(
        default=3,
        description="Whole-JobSet restarts after a retriable failure before the TrainJob fails (0: fail at once).",
    )
    restart_strategy: Literal["Recreate", "BlockingRecreate"] = Field(
        default="Recreate",
        description="JobSet restart strategy; BlockingRecreate waits until every old pod is gone.",
    )
    non_retriable_exit_codes: list[int] = Field(
        default_factory=lambda: [2, 126, 127],
        description="Container exit codes that fail the TrainJob without a restart.",
    )
    active_deadline_seconds: int | None = Field(
        default=None, ge=1, description="Deadline of each step Job per attempt; exceeding it fails the TrainJob."
    )
    termination_grace_period_seconds: int = Field(
        default=GRACE_SECONDS,
        ge=0,
        le=86400,
        description=(
            "Seconds a job's processes get between SIGTERM and SIGKILL when it is preempted, evicted or deleted: "
            "time to write a checkpoint. Its quota stays held meanwhile (Kueue waits for the pods to end)."
        ),
    )

    @field_validator("max_restarts")
    @classmethod
    def _restarts(cls, value: int) -> int:
        if value < 0:
            raise ValueError(
                "maxRestarts must be 0 or more; hint: 0 fails the TrainJob on the first failure, "
                "N restarts the whole JobSet up to N times"
            )
        return value

    @field_validator("non_retriable_exit_codes")
    @classmethod
    def _codes(cls, codes: list[int]) -> list[int]:
        bad = [c for c in codes if not 1 <= c <= 255]
        if bad:
            raise ValueError(f"exit codes are 1..255 (0 is success), found {bad}")
        return sorted(set(codes))

    def merged(self, override: FaultTolerance | None) -> FaultTolerance:
        """The defaults with the keys an override sets (an override names only what differs)."""
        if override is None:
            return self
        return self.model_copy(update={k: getattr(override, k) for k in override.model_fields_set})


def failure_policy(ft: FaultTolerance) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    if ft.non_retriable_exit_codes:
        rules.append({"name": RULE_NON_RETRIABLE, "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]})
    if ft.active_deadline_seconds is not None:
        rules.append({"name": RULE_DEADLINE, "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]})
    policy: dict[str, Any] = {"maxRestarts": ft.max_restarts, "restartStrategy": ft.restart_strategy}
    if rules:
        policy["rules"] = rules
    return policy


def pod_failure_policy(ft: FaultTolerance) -> dict[str, Any]:
    rules: list[dict[str, Any]] = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    if ft.non_retriable_exit_codes:
        rules.append({"action": "FailJob", "onExitCodes": {"operator": "In", "values": ft.non_retriable_exit_codes}})
    return {"rules": rules}


def inject_fault_tolerance(ft: FaultTolerance, runtime: dict[str, Any]) -> dict[str, Any]:
    """The JobSet `failurePolicy` and, on every step Job, `podFailurePolicy` (pods `restartPolicy: Never`,
    which it requires), `backoffLimit: 0` on training Jobs, the optional deadline and the pods' grace period.
    What a runtime file already sets wins: the platform fills gaps, it never rewrites a runtime author's choice."""
    out = copy.deepcopy(runtime)
    spec = out["spec"]["template"]["spec"]
    spec.setdefault("failurePolicy", failure_policy(ft))
    for job in replicated_jobs(out):
        if not is_step_job(job):
            continue
        job_spec = job["template"].setdefault("spec", {})
        pod = job_spec.setdefault("template", {}).setdefault("spec", {})
        if pod.setdefault("restartPolicy", "Never") == "Never":
            job_spec.setdefault("podFailurePolicy", pod_failure_policy(ft))
        if is_training(job) or job.get("name") == "launcher":
            job_spec.setdefault("backoffLimit", 0)
        if ft.active_deadline_seconds is not None:
            job_spec.setdefault("activeDeadlineSeconds", ft.active_deadline_seconds)
        pod.setdefault("terminationGracePeriodSeconds", ft.termination_grace_period_seconds)
    return out


def ttl_problems(runtime: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(path, message) for every `ttlSecondsAfterFinished` in a runtime: unsafe at the Trainer versions we
    support (see the module docstring)."""
    spec = runtime.get("spec", {}).get("template", {}).get("spec", {})
    why = (
        "deleting a finished JobSet makes Trainer 2.2/2.3 recreate it with a fresh restart budget "
        f"({', '.join(TTL_ISSUES)}); remove it"
    )
    if "ttlSecondsAfterFinished" in spec:
        yield "spec.template.spec.ttlSecondsAfterFinished", why
    for i, job in enumerate(replicated_jobs(runtime)):
        if "ttlSecondsAfterFinished" in (job.get("template", {}).get("spec") or {}):
            yield (
                f"spec.template.spec.replicatedJobs[{i}].template.spec.ttlSecondsAfterFinished",
                "a Job TTL deletes a finished step Job and the JobSet recreates it (the step runs again); remove it",
            )
