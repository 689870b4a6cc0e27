"""A runtime file (`runtimes/<name>.yaml`) as typed data: a ClusterTrainingRuntime plus catalog annotations.

The models cover the parts of the Trainer `v1alpha1` TrainingRuntime and JobSet `v1alpha2` spec the catalog
reads or edits; every level rejects unknown keys, so a misspelt field is an error with its path instead of
being pruned by the API server. Pod specs and the JobSet policies stay plain dicts: the conformance harness
validates them against the CRD schema of the selected Trainer version.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from trainer_infra.core.types import DnsLabel, DnsSubdomain
from trainer_infra.core.upstream import trainer
from trainer_infra.manifests.runtime import ANCESTOR_LABEL, TRAINER_API_VERSION

DOMAIN = "trainer-platform.io"
SUPPORT_LABEL = trainer.SUPPORT_LABEL
DEPRECATED = "deprecated"
# Annotations a runtime file carries for the catalog (stripped or kept as documented in README).
RUNTIME_VERSION = f"{DOMAIN}/runtime-version"
TRAINER_VERSIONS = f"{DOMAIN}/trainer-versions"
REQUIRES = f"{DOMAIN}/requires"
DESCRIPTION = f"{DOMAIN}/description"
CATALOG_ANNOTATIONS = (RUNTIME_VERSION, TRAINER_VERSIONS, REQUIRES, DESCRIPTION)
# Features a runtime may require from the platform (annotation `requires`, comma-separated).
FEATURES = ("data-cache",)


class K8sModel(BaseModel):
    """camelCase keys as in Kubernetes; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class ObjectMeta(K8sModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class RuntimeMeta(ObjectMeta):
    name: DnsSubdomain


class PodTemplate(K8sModel):
    metadata: ObjectMeta | None = None
    spec: dict[str, Any]


class JobSpec(K8sModel):
    """batch/v1 JobSpec fields the runtime CRD allows; the pod template is what injections edit."""

    template: PodTemplate
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    backoff_limit_per_index: int | None = None
    completion_mode: str | None = None
    completions: int | None = None
    managed_by: str | None = None
    manual_selector: bool | None = None
    max_failed_indexes: int | None = None
    parallelism: int | None = None
    pod_failure_policy: dict[str, Any] | None = None
    pod_replacement_policy: str | None = None
    selector: dict[str, Any] | None = None
    success_policy: dict[str, Any] | None = None
    suspend: bool | None = None
    ttl_seconds_after_finished: int | None = None


class JobTemplate(K8sModel):
    metadata: ObjectMeta | None = None
    spec: JobSpec

    @property
    def ancestor(self) -> str | None:
        return (self.metadata.labels if self.metadata else {}).get(ANCESTOR_LABEL)


class DependsOn(K8sModel):
    name: DnsLabel
    status: Literal["Ready", "Complete"]


class ReplicatedJob(K8sModel):
    name: DnsLabel
    template: JobTemplate
    replicas: int | None = Field(default=None, description="JobSet defaults it to 1.")
    depends_on: list[DependsOn] | None = None
    group_name: str | None = None


class JobSetSpec(K8sModel):
    replicated_jobs: list[ReplicatedJob] = Field(min_length=1)
    coordinator: dict[str, Any] | None = None
    failure_policy: dict[str, Any] | None = None
    managed_by: str | None = None
    network: dict[str, Any] | None = None
    startup_policy: dict[str, Any] | None = None
    success_policy: dict[str, Any] | None = None
    suspend: bool | None = None
    ttl_seconds_after_finished: int | None = None
    volume_claim_policies: list[dict[str, Any]] | None = None


class JobSetTemplate(K8sModel):
    metadata: ObjectMeta | None = None
    spec: JobSetSpec


class TorchPolicy(K8sModel):
    env_injection: dict[str, Any] | None = Field(default=None, description="Trainer >= 2.3 only.")


class MpiPolicy(K8sModel):
    num_proc_per_node: int | None = Field(default=None, ge=1)
    mpi_implementation: Literal["OpenMPI"] | None = None
    ssh_auth_mount_path: str | None = None
    run_launcher_as_node: bool | None = None


class EmptyPolicy(K8sModel):
    """`jax: {}`, `xgboost: {}`: the policy is chosen by being present."""


class FluxPolicy(K8sModel):
    num_proc_per_node: int | None = Field(default=None, ge=1)


POLICY_SOURCES = ("torch", "mpi", "jax", "xgboost", "flux")


class MLPolicy(K8sModel):
    num_nodes: int | None = Field(default=None, ge=1)
    torch: TorchPolicy | None = None
    mpi: MpiPolicy | None = None
    jax: EmptyPolicy | None = None
    xgboost: EmptyPolicy | None = None
    flux: FluxPolicy | None = None

    @property
    def sources(self) -> list[str]:
        return [s for s in POLICY_SOURCES if getattr(self, s) is not None]

    @model_validator(mode="after")
    def _one_source(self) -> MLPolicy:
        # Same rule as the CRD's CEL check, reported here with the file and path.
        if len(self.sources) > 1:
            raise ValueError(f"at most one ML policy source ({', '.join(POLICY_SOURCES)}); found {self.sources}")
        return self


class RuntimeSpec(K8sModel):
    ml_policy: MLPolicy
    template: JobSetTemplate
    pod_group_policy: dict[str, Any] | None = None


class RuntimeFile(K8sModel):
    """One runtime file: a ClusterTrainingRuntime whose images may contain `${TRAINER_VERSION}`."""

    api_version: str
    kind: Literal["ClusterTrainingRuntime"]
    metadata: RuntimeMeta
    spec: RuntimeSpec

    @field_validator("api_version")
    @classmethod
    def _trainer_api(cls, value: str) -> str:
        if value != TRAINER_API_VERSION:  # reported as the literal it stands for
            expected = {"expected": repr(TRAINER_API_VERSION)}
            raise PydanticCustomError("literal_error", "Input should be {expected}", expected)
        return value
