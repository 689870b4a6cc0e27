"""Config of the queueing setup: stack-wide `queues:` (the per-team quota is in teams/quota.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import DnsLabel, DnsSubdomain, Int32
from trainer_infra.core.upstream.kueue import PRIORITY_LABEL


class TopologyPolicy(StrictModel):
    """TAS placement of a runtime's training pods: at most one of required / preferred / unconstrained.
    Levels are named by their short name (`rack`) or full label key."""

    required: str | None = Field(default=None, description="All pods in one domain of this level, or wait.")
    preferred: str | None = Field(default=None, description="Try one domain of this level, then go coarser.")
    unconstrained: bool = Field(default=False, description="TAS accounting without a placement constraint.")

    @model_validator(mode="after")
    def _one_mode(self) -> TopologyPolicy:
        if sum([self.required is not None, self.preferred is not None, self.unconstrained]) > 1:
            raise ValueError("set at most one of required, preferred, unconstrained (Kueue accepts one per pod set)")
        return self


class PlacementConfig(StrictModel):
    default: TopologyPolicy = Field(default_factory=TopologyPolicy, description="For runtimes not listed.")
    runtimes: dict[str, TopologyPolicy] = Field(default_factory=dict, description="By runtime name.")


class PriorityClassConfig(StrictModel):
    name: DnsSubdomain
    value: Int32 = Field(description="Higher wins; a 32-bit integer (WorkloadPriorityClass.value).")
    description: str = Field(default="", max_length=2048)


#: What Kueue 0.19 gives a job without the `kueue.x-k8s.io/priority-class` label (and without a pod
#: priorityClassName or a globalDefault PriorityClass): `constants.DefaultPriority`. A default class must
#: have this value, since a WorkloadPriorityClass is only applied to labelled jobs (defaulting one is the
#: alpha gate WorkloadPriorityClassDefaulting).
UNLABELLED_PRIORITY = 0


def _default_priorities() -> list[PriorityClassConfig]:
    return [
        PriorityClassConfig(name="low", value=-100, description="Preemptible experiments."),
        PriorityClassConfig(
            name="normal", value=UNLABELLED_PRIORITY, description="Default: what a job without the label gets."
        ),
        PriorityClassConfig(name="high", value=10000, description="Deadlines; preempts lower priorities."),
    ]


class PreemptionConfig(StrictModel):
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "LowerPriority"
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    borrow_within_cohort: Literal["Never", "LowerPriority"] = "Never"


class CohortConfig(StrictModel):
    name: DnsLabel = Field(default="trainer-platform", description="The Cohort every team queue joins.")
    oversubscribe: bool = Field(
        default=False, description="Allow the sum of team quotas on a pool to exceed its capacity."
    )


class QueuesConfig(StrictModel):
    """Kueue queueing for teams on the node pools (one ClusterQueue per team, one shared Cohort)."""

    cohort: CohortConfig = Field(default_factory=CohortConfig)
    preemption: PreemptionConfig = Field(default_factory=PreemptionConfig)
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    priority_classes: list[PriorityClassConfig] = Field(
        default_factory=_default_priorities,
        description=f"WorkloadPriorityClasses (label {PRIORITY_LABEL}).",
    )
    default_priority_class: DnsSubdomain | None = Field(
        default="normal",
        description=(
            "The class a job without the label is equivalent to: it must have value 0, the priority Kueue gives "
            "unlabelled jobs. null: no class is the default."
        ),
    )
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
