"""`runtimes:` in the stack config: which catalog runtimes a stack serves, and how."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, field_validator

from trainer_infra.catalog.fault_tolerance import FaultTolerance
from trainer_infra.catalog.security_context import RuntimeSecurityContext
from trainer_infra.core.model import Resources, StrictModel
from trainer_infra.core.types import DnsLabel, DnsSubdomain, ImageRef, PositiveInt32, SemVer
from trainer_infra.core.upstream.trainer import SDK_DEVICE_LIMITS, SDK_DEVICE_PREFIXES
from trainer_infra.manifests.runtime import image_problem

RuntimeName = DnsSubdomain
SDK_DEVICES = ", ".join([*SDK_DEVICE_LIMITS[:1], *(f"{p}*" for p in SDK_DEVICE_PREFIXES), *SDK_DEVICE_LIMITS[1:]])


def sdk_knows_device(limits: Mapping[str, object]) -> bool:
    """Whether the SDK can tell a trainer container's device from its limits (no limits: it does not ask)."""
    return not limits or any(k in SDK_DEVICE_LIMITS or k.startswith(SDK_DEVICE_PREFIXES) for k in limits)


def sdk_device_problem(resources: Resources | None) -> Resources | None:
    """The SDK's rule for a trainer container's limits (a ValueError naming the fix)."""
    if not sdk_knows_device(resources.limits if resources is not None else {}):
        raise ValueError(
            "limits without cpu or an accelerator: the kubeflow SDK cannot tell the trainer's device and "
            "TrainerClient().list_runtimes() fails; add a cpu limit (or the GPU limit)"
        )
    return resources


class RuntimeOverride(StrictModel):
    """Per-stack changes to one runtime's trainer (`node`) containers and node count."""

    image: ImageRef | None = Field(default=None, description="Image of every `node` container (tag required).")
    num_nodes: PositiveInt32 | None = Field(default=None, description="`spec.mlPolicy.numNodes`.")
    resources: Resources | None = Field(default=None, description="Resources of every `node` container.")
    fault_tolerance: FaultTolerance | None = Field(
        default=None, description="Keys that differ from `runtimes.faultTolerance` for this runtime."
    )

    sdk_device = field_validator("resources")(sdk_device_problem)

    @field_validator("image")
    @classmethod
    def _pinned(cls, image: str | None) -> str | None:
        problem = image_problem(image) if image is not None else None
        if problem:
            raise ValueError(problem)
        return image


class TeamRuntime(StrictModel):
    """A namespaced TrainingRuntime for one team, built from a catalog runtime. The SDK prefers a
    namespaced runtime over a cluster one of the same name, so `name` equal to the catalog name shadows
    the ClusterTrainingRuntime for that team only."""

    team: DnsLabel = Field(description="`teams[].name` of the team; the runtime goes into its namespace.")
    runtime: RuntimeName = Field(description="Catalog runtime it is built from.")
    name: RuntimeName | None = Field(default=None, description="Object name (default: the catalog name).")
    overrides: RuntimeOverride = Field(default_factory=RuntimeOverride)


class RuntimesConfig(StrictModel):
    """The runtime catalog (`runtimes/`) served as ClusterTrainingRuntimes. Runtimes are protected and
    retained in the cluster (running TrainJobs reference them); see README "Runtime catalog"."""

    enabled: list[RuntimeName] | None = Field(
        default=None,
        description=(
            "Runtimes to serve (default: every catalog runtime the selected Trainer version supports; "
            "data-cache runtimes only with dataCache.enabled, runtimes with the upstream initializers only with "
            "storage.mountPath /workspace)."
        ),
    )
    versions: dict[RuntimeName, SemVer] = Field(
        default_factory=dict,
        description="Catalog version the stable name serves, per runtime (default: the newest supported).",
    )
    versioned_names: bool = Field(
        default=False,
        description="Also serve every catalog version of each enabled runtime as `<name>-v<version>`, for pinning.",
    )
    overrides: dict[RuntimeName, RuntimeOverride] = Field(default_factory=dict, description="Per-runtime changes.")
    default_resources: Resources | None = Field(
        default_factory=lambda: Resources(requests={"cpu": "1", "memory": "2Gi"}),
        description=(
            "Resources for every runtime container that sets none (injection `resources`). Without requests "
            "a pod is BestEffort, and Kueue's topology-aware admission never places it (found in the e2e "
            "sandbox with initializers); null turns the injection off."
        ),
    )
    fault_tolerance: FaultTolerance = Field(
        default_factory=FaultTolerance,
        description="JobSet restart limit, non-retriable exit codes and deadline of every runtime's TrainJobs.",
    )
    security_context: RuntimeSecurityContext = Field(
        default_factory=RuntimeSecurityContext,
        description="Injection `pod-security`: non-root user, seccomp and capabilities that let every runtime "
        "pass Pod Security `restricted` (see docs/teams.md#pod-security).",
    )
    sdk_device = field_validator("default_resources")(sdk_device_problem)

    retiring: list[RuntimeName] = Field(
        default_factory=list,
        description=(
            "Enabled runtimes on their way out: labelled deprecated and unprotected, so that removing them "
            "in a later `pulumi up` goes through."
        ),
    )
    teams: list[TeamRuntime] = Field(default_factory=list, description="Team-scoped TrainingRuntimes.")
