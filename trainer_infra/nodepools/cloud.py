"""What every cloud backend's `cloud.<backend>` block shares: values given literally or read from the cluster
stack's outputs (the usual layout: a cluster stack makes the cluster, VPC and IAM; this platform stack reads their
names), and the explicit provider of the cluster built from them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from trainer_infra.core.cloud import CloudProvider, CloudSdk, Ref, StackOutput
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.nodepools.backend import BackendDefaults
from trainer_infra.nodepools.model import NodePool, ResolvedPool

STACK_NAME = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"


class FromStack(StrictModel):
    """An output of another Pulumi stack, read when the program runs (`pulumi.StackReference`)."""

    stack: str = Field(pattern=STACK_NAME, description="The exporting stack, fully qualified: org/project/stack.")
    output: str = Field(min_length=1, description="The name of its output, e.g. clusterName.")


#: A value of a `cloud.<backend>` block: literal, or `{stack: org/project/stack, output: name}`.
RefConfig = str | FromStack


def ref(value: RefConfig) -> Ref:
    return StackOutput(value.stack, value.output) if isinstance(value, FromStack) else value


def provider(sdk: CloudSdk, backend: str, args: Mapping[str, RefConfig | None]) -> CloudProvider:
    """The explicit provider of a backend's cluster: named after the backend (one cluster per stack; a fleet
    prefixes every resource with its cluster). `args` without the unset ones; never credentials."""
    return CloudProvider(sdk, f"{backend}-provider", {k: ref(v) for k, v in sorted(args.items()) if v is not None})


class CloudNodeGroup(BackendDefaults):
    """What every cloud node group shares: a fixed `size.count`, or autoscaling `size.min`..`size.max` whose
    quotas count the max (what the autoscaler can reach)."""

    def autoscaling(self, pool: NodePool, settings: Any) -> tuple[int, int] | None:
        return (pool.size.min or 0, pool.size.max) if pool.size.max is not None else None

    def node_count(self, pool: NodePool, settings: Any) -> int:
        return pool.size.max if pool.size.max is not None else pool.size.count or 0


def size_issues(pool: ResolvedPool) -> list[ConfigIssue]:
    """A cloud node group's size is a count or a min..max range, exactly one."""
    size = pool.config.size
    if size.count is not None and size.max is not None:
        return [ConfigIssue(f"{pool.at}.size", "set count (fixed) or min/max (autoscaling), not both")]
    if size.count is None and size.max is None:
        return [ConfigIssue(f"{pool.at}.size", "required: count (fixed) or max (autoscaling)")]
    if size.max is not None and (size.min or 0) > size.max:
        return [ConfigIssue(f"{pool.at}.size.min", f"more than size.max ({size.max})", str(size.min))]
    return []
