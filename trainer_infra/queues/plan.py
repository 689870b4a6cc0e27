"""The planner of this area: the Kueue objects derived from resolved pools and teams."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core.objects import PlanPart
from trainer_infra.queues.config import QueuesConfig
from trainer_infra.queues.derive import queue_objects
from trainer_infra.queues.resolve import ResolvedQueues
from trainer_infra.teams.model import TeamConfig


def queues_plan(api: str, q: QueuesConfig, teams: Sequence[TeamConfig], resolved: ResolvedQueues) -> PlanPart:
    return PlanPart(objects=tuple(queue_objects(api, q, teams, resolved)))
