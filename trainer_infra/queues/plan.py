"""The planner of this area: node pool objects and the Kueue objects derived from pools and teams."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_infra.nodepools.plan import node_pool_objects
from trainer_infra.plan.model import PlanPart
from trainer_infra.queues.derive import queue_objects

if TYPE_CHECKING:
    from trainer_infra.config.stack import StackConfig


def pools_and_queues_plan(cfg: StackConfig) -> PlanPart:
    return PlanPart(objects=tuple(node_pool_objects(cfg) + queue_objects(cfg)))
